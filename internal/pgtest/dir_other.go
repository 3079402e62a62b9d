//go:build !linux

package pgtest

// clustersDir is where a cluster's directory is made: the temporary
// directory.
func clustersDir() string { return "" }
