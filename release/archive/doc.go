// Package archive writes and reads the deterministic source archive of a
// release, runtime/lfmq-src.tar.gz (docs/release.md, "Reproducibility").
//
// The bytes depend only on the files' paths, contents and executable bits:
// entries are sorted by path bytes with every directory before its contents,
// headers are literals (mode 0644 or 0755, uid/gid 0, no user names,
// ModTime 1980-01-01T00:00:00Z, no access or change time, USTAR unless a
// name needs PAX), and the gzip stream (klauspost/compress) has a fixed
// level, no name and ModTime = Unix(0, 0).
//
// Reading is for untrusted archives: only regular files and directories
// under one top-level directory, safe paths, bounded sizes. The package does
// not choose which files of a module go into an archive (package bundle
// does).
package archive
