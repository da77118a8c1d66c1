package bundle

import (
	"fmt"
	"path"
	"strings"

	"github.com/lfmq/lfmq/evidence"
	"github.com/lfmq/lfmq/evidence/report"
	"github.com/lfmq/lfmq/evidence/task"
)

// RenderQuality renders the model card's quality section from a release's
// evidence files: each evidence JSON file is parsed (evidence.Parse) and
// rendered by evidence/report as the docs/scoring.md, "Output" table,
// under a heading naming the file and a line naming the rows that are
// this release's checkpoint. SVG plots are skipped: the builder shows
// them on the card as images. lfmq release build passes it as
// Options.Quality, the one place the card's quality tables come from; it
// lives here rather than in evidence/card because its refusal is an
// InputError of this package, which imports evidence/card.
//
// A file that scored no candidate with the checkpoint's manifest sha256 is
// refused: the card would present another checkpoint's figures as this
// release's. Task results (lfmq eval --out) are shown in one table whose
// rows say which checkpoint they ran (the BF16 reference's own task
// results belong on the card too), and gate files (lfmq eval compare
// --out) in another.
func RenderQuality(files []EvidenceFile, manifestSHA256 string) ([]string, error) {
	var out []string
	var tasks []report.TaskFile
	var gates []report.GateFile
	for _, f := range files {
		if path.Ext(f.Path) != ".json" {
			continue
		}
		switch {
		case task.IsFile(f.Data):
			tf, err := task.Parse(f.Path, f.Data)
			if err != nil {
				return nil, err
			}
			tasks = append(tasks, report.TaskFile{Path: f.Path, File: tf})
			continue
		case task.IsGate(f.Data):
			g, err := task.ParseGate(f.Path, f.Data)
			if err != nil {
				return nil, err
			}
			gates = append(gates, report.GateFile{Path: f.Path, Gate: g})
			continue
		}
		ef, err := evidence.Parse(f.Path, f.Data)
		if err != nil {
			return nil, err
		}
		var this, others []string
		for _, c := range ef.Receipts.Candidates {
			if c.Identity == manifestSHA256 || c.ManifestSHA256 == manifestSHA256 {
				this = append(this, "`"+c.Name+"`")
			} else {
				others = append(others, fmt.Sprintf("%s (%s)", c.Name, shortSHA(c.Identity)))
			}
		}
		if len(this) == 0 {
			return nil, &InputError{Path: "--evidence " + path.Base(f.Path), Option: true,
				Msg: fmt.Sprintf("scores no candidate with this checkpoint's manifest sha256 %s (it scores %s); "+
					"score the checkpoint (lfmq score --candidate NAME=CHECKPOINT_DIR ...) or leave this file out",
					shortSHA(manifestSHA256), strings.Join(others, ", "))}
		}
		which := strings.Join(this, " and ") + " below"
		if len(ef.Receipts.Candidates) == 1 {
			which = "the one candidate below, " + this[0] // the table has no candidate column then
		}
		out = append(out, "### `"+f.Path+"`\n\nThis release's checkpoint (manifest sha256 `"+manifestSHA256+"`) is "+
			which+".\n\n"+report.Markdown(ef))
	}
	if len(tasks) > 0 {
		out = append(out, "### Tasks\n\nTask results from `lfmq eval` (docs/eval.md): accuracy with its Wilson 95 % interval; "+
			"\"this release\" marks runs of this release's checkpoint (manifest sha256 `"+manifestSHA256+"`), "+
			"other runs name the checkpoint or served model they asked.\n\n"+report.TaskTable(tasks, manifestSHA256))
	}
	if len(gates) > 0 {
		out = append(out, "### Release gates\n\nEach gate compares the texts of the same items across runs (`lfmq eval compare`): "+
			"seeded sampling must give the same bytes at any concurrency and with speculation on or off.\n\n"+report.GateTable(gates))
	}
	return out, nil
}

// shortSHA is the first 12 hex digits of a sha256, for messages.
func shortSHA(s string) string {
	if len(s) > 12 {
		return s[:12] + "…"
	}
	return s
}
