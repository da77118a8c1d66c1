// Package cputime reads the CPU time the process has used. The benchmarks
// report throughput per CPU second beside wall-clock throughput, because on
// a shared machine the wall clock also counts the time a benchmark spent
// waiting for a core.
package cputime
