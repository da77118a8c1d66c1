package card

import "slices"

// LicenseIDs are the licence identifiers the Hugging Face Hub accepts as a
// card's license, in the order the hub documents them. The hub refuses a
// push whose card names any other, so a release is checked against this
// list when it is built rather than when it is published. A licence that is
// not listed is published as "other" with a license_name.
var LicenseIDs = []string{
	"apache-2.0", "mit", "openrail", "bigscience-openrail-m", "creativeml-openrail-m",
	"bigscience-bloom-rail-1.0", "bigcode-openrail-m", "afl-3.0", "artistic-2.0", "bsl-1.0",
	"bsd", "bsd-2-clause", "bsd-3-clause", "bsd-3-clause-clear", "c-uda", "cc", "cc0-1.0",
	"cc-by-2.0", "cc-by-2.5", "cc-by-3.0", "cc-by-4.0", "cc-by-sa-3.0", "cc-by-sa-4.0",
	"cc-by-nc-2.0", "cc-by-nc-3.0", "cc-by-nc-4.0", "cc-by-nd-4.0", "cc-by-nc-nd-3.0",
	"cc-by-nc-nd-4.0", "cc-by-nc-sa-2.0", "cc-by-nc-sa-3.0", "cc-by-nc-sa-4.0",
	"cdla-sharing-1.0", "cdla-permissive-1.0", "cdla-permissive-2.0", "wtfpl", "ecl-2.0",
	"epl-1.0", "epl-2.0", "etalab-2.0", "eupl-1.1", "eupl-1.2", "agpl-3.0", "gfdl", "gpl",
	"gpl-2.0", "gpl-3.0", "lgpl", "lgpl-2.1", "lgpl-3.0", "isc", "h-research", "intel-research",
	"lppl-1.3c", "ms-pl", "apple-ascl", "apple-amlr", "mpl-2.0", "odc-by", "odbl", "openmdw-1.0",
	"openrail++", "osl-3.0", "postgresql", "ofl-1.1", "ncsa", "unlicense", "zlib", "pddl",
	"lgpl-lr", "deepfloyd-if-license", "fair-noncommercial-research-license", "llama2", "llama3",
	"llama3.1", "llama3.2", "llama3.3", "llama4", "grok2-community", "gemma", "unknown", "other",
}

// KnownLicense reports whether id is one of LicenseIDs, compared exactly:
// the identifiers are lower case, as cards spell them.
func KnownLicense(id string) bool { return slices.Contains(LicenseIDs, id) }
