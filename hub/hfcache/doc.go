// Package hfcache finds a model given by its hub id, OWNER/NAME[@REVISION],
// in the Hugging Face cache that huggingface_hub keeps, and fills that cache
// from the hub when the model is not (all) there.
//
// The layout is huggingface_hub's, so that both share one copy:
//
//	ROOT/models--OWNER--NAME/blobs/ID             the bytes (ID: LFS sha256, else git blob id)
//	ROOT/models--OWNER--NAME/snapshots/COMMIT/P   a relative link to ../../blobs/ID
//	ROOT/models--OWNER--NAME/refs/REVISION        the commit a branch or tag named
//
// ROOT is $HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub,
// else ~/.cache/huggingface/hub. A snapshot that holds what lfmq reads
// (config.json, the tokenizer and every weight shard) is used without the
// network. Otherwise the revision is resolved to its commit on the hub, the
// commit's checkpoint files are listed, and each missing one is fetched into
// blobs/ID.incomplete (resumed after an interruption), checked against the
// size and digest the hub's tree lists, renamed to blobs/ID and linked into
// the snapshot. Nothing partial ever appears under snapshots/.
//
// It does not load or check the checkpoint itself (format/hf does).
package hfcache
