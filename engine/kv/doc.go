// Package kv holds what a sequence keeps of the tokens it has seen, apart
// from the model that computes it: the number formats of the KV cache
// (DType, Rows), the paged pool the CPU engine's keys and values live in
// (Pool, Page) and a sequence's page table (Table), the conv state of the
// short-conv layers (ConvState), and spans of a sequence's state that a
// prefix cache keeps and marshals (Span).
//
// Everything here is sized by a Shape (layer kinds, widths, KV format),
// never by a model: a drafter with its own per-sequence KV adds layer
// slots to the full pages, and sliding-window layers keep theirs in window
// pages that a sequence gives back as its window moves on
// (docs/kv-cache.md, "Sliding layers"), without touching the forward.
//
// The package computes nothing of a forward and knows no device: the CPU
// runner in engine/model writes and reads the pages; a device runner keeps
// its own buffers and meets this package only through spans' rows.
package kv
