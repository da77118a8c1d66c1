// Package bom recognises the UTF-8 byte-order mark that some editors
// (Windows Notepad, Excel's "UTF-8" CSV export) put at the start of a text
// file. JSON does not allow it, and encoding/json reports it as "invalid
// character 'ï'", which names neither the cause nor the fix; the readers of
// JSON and JSONL inputs check for it first and say what to do.
package bom

import "bytes"

// utf8BOM is U+FEFF encoded in UTF-8.
var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// Has reports whether data starts with the UTF-8 byte-order mark.
func Has(data []byte) bool { return bytes.HasPrefix(data, utf8BOM) }

// Advice is the message for a JSON or JSONL file that starts with one.
const Advice = "starts with a UTF-8 byte-order mark (bytes EF BB BF), which JSON does not allow: save the file as UTF-8 without a BOM"
