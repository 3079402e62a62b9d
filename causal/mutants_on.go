//go:build causal_mutants

package causal

// mutantsBuilt is true under -tags causal_mutants, which `make test` sets
// for the negative-control tests: the deliberate defects withMutation
// names are then built in.
const mutantsBuilt = true
