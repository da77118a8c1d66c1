// Package progress reports the progress of long work to a person: a
// progress bar on a terminal, a status line every few seconds elsewhere (a
// log, CI), bars of bytes for a verification's hashing (Bytes) and a
// publish's uploads (Uploads), with an estimate of the time left
// (internal/eta) for a GPTQ run whose work comes in kinds of different
// speeds, and the work trace that records such a run's reports for
// calibrating those kinds' costs (LFMQ_WORK_TRACE).
//
// It is not the work itself, nor the command line: it never decides what
// runs or how a command's summary reads; callers hand it the stream, whether
// that stream is a terminal, and how often to write.
package progress
