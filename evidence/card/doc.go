// Package card renders a release's model card, README.md
// (docs/release.md, "The model card"): Hugging Face YAML front matter,
// what the release is, the precision table, the quality tables and plots,
// how to download, verify and launch, the pins and the modifications notice.
//
// The card is rendered, never typed by hand, and deterministic: the same
// Input gives the same bytes. It reads nothing itself; the caller passes
// the manifest, the runtime digests and the quality section already
// rendered as Markdown (from the evidence files, by evidence/report), so
// this package knows nothing of scoring. It also reads the front matter of
// a source model's card (ParseFrontMatter) to carry its licence and
// languages over.
package card
