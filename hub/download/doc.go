// Package download fetches a release from a Hugging Face style hub
// (docs/release.md, "Downloading"): files at
// {URL}/resolve/{revision}/{path}, SHA256SUMS first, then its signature
// SHA256SUMS.sig when the hub has one (checked there and then when
// allowed signers are given), then every listed file with bounded
// parallelism, each resumed with an HTTP Range request when a partial
// copy exists, checked against its sha256 before it takes its final
// name, and the whole directory verified at the end (package verify). A
// bad file is never kept.
//
// It fetches and checks; it does not launch or serve the release.
package download
