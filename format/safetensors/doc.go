// Package safetensors reads and writes safetensors files: an 8-byte
// little-endian header length, a JSON header describing each tensor's dtype,
// shape and byte span, and the tensors' bytes.
//
// Reading is strict because checkpoints are untrusted input. Open memory-maps
// the file (read-only; on systems without mmap support it reads the file into
// memory instead) and rejects, with a *FormatError naming the file, the
// tensor and the field, any header that is oversized, not a JSON object,
// holds duplicate keys or unknown fields, names an unknown dtype, has a shape
// that disagrees with its byte span, or whose spans overlap, leave gaps or do
// not end exactly at the end of the file. ParseHeader applies the same checks
// to a header held in memory.
//
// Writing is deterministic: Write sorts tensors by name, lays their bytes out
// contiguously in that order, emits compact JSON with the metadata first and
// pads the header with spaces to a multiple of 8 bytes, so the same tensors
// and metadata always give the same bytes. Write replaces its target
// atomically (temporary file, fsync, rename, directory fsync).
//
// Package safetensors is not a tensor library and knows nothing of models:
// it hands out raw little-endian bytes (or float32 copies through
// format/dtype), does not interpret tensor names or metadata, and does not
// read sharded checkpoints' index files.
package safetensors
