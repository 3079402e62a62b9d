//go:build !causal_mutants

package causal

// mutantsBuilt is false in every build but this package's negative-control
// tests' (-tags causal_mutants): the checks for deliberate defects then
// fold away, and withMutation changes nothing.
const mutantsBuilt = false
