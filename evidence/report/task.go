package report

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/lfmq/lfmq/evidence/task"
)

// TaskFile is a task evidence file with the path it is shown under.
type TaskFile struct {
	Path string
	File *task.File
}

// TaskTable renders task results (lfmq eval) as one Markdown table, a row
// per run and seed in the order given: the run's label, the model it ran
// ("this release" when its checkpoint identity is thisIdentity), the
// settings that make it what it is (task, items, concurrency, sampling,
// new-token limit, seed), the accuracy with its Wilson 95 % interval, the
// truncations and the mean new tokens.
func TaskTable(files []TaskFile, thisIdentity string) string {
	var b strings.Builder
	row(&b, []string{"run", "model", "task", "items", "concurrency", "sampling", "max new tokens", "seed", "accuracy (95% interval)", "truncated", "mean new tokens", "file"})
	row(&b, []string{"---", "---", "---", "---:", "---:", "---", "---:", "---:", "---", "---:", "---:", "---"})
	for _, tf := range files {
		f := tf.File
		model := modelOf(f)
		if id := CheckpointIdentity(f); id != "" && id == thisIdentity {
			model = "this release"
		}
		maxTok := "–"
		if f.Settings.MaxTokens > 0 {
			maxTok = thousands(f.Settings.MaxTokens)
		}
		for _, r := range f.Runs {
			seed := "–"
			if r.Seed != nil {
				seed = strconv.FormatUint(*r.Seed, 10)
			}
			s := r.Summary
			meanNew := strconv.FormatFloat(float64(s.MeanNewTokens), 'f', 1, 64)
			if f.Task == task.Choice {
				meanNew = "–" // likelihood scoring generates nothing
			}
			row(&b, []string{f.Settings.Label, model, string(f.Task), thousands(s.Items), strconv.Itoa(f.Settings.Concurrency),
				samplingText(f), maxTok, seed,
				fmt.Sprintf("%s%% (%s–%s)", pct1(float64(s.Accuracy)), pct1(float64(s.WilsonLow)), pct1(float64(s.WilsonHigh))),
				thousands(s.Truncated), meanNew, "`" + tf.Path + "`"})
		}
	}
	return b.String()
}

// GateFile is a gate file (lfmq eval compare --out) with its path.
type GateFile struct {
	Path string
	Gate *task.Gate
}

// GateTable renders release gates as a Markdown table, a row per gate:
// the runs compared (their labels and concurrency), the items and seeds,
// and the verdict with the first difference when there is one.
func GateTable(gates []GateFile) string {
	var b strings.Builder
	row(&b, []string{"gate", "runs compared", "items", "seeds", "verdict"})
	row(&b, []string{"---", "---", "---:", "---", "---"})
	for _, gf := range gates {
		g := gf.Gate
		var runs []string
		for _, r := range g.Runs {
			name := r.Label
			if name == "" {
				name = r.Path
			}
			runs = append(runs, fmt.Sprintf("%s (concurrency %d)", name, r.Concurrency))
		}
		seeds := make([]string, len(g.Seeds))
		for i, s := range g.Seeds {
			seeds[i] = strconv.FormatUint(s, 10)
		}
		verdict := "same texts, byte for byte"
		if !g.Identical {
			verdict = fmt.Sprintf("**differ**: %d item texts; first item %s, %s at byte %d", g.Differing, g.First.Item, g.First.Field, g.First.Offset)
		}
		row(&b, []string{"`" + gf.Path + "`", strings.Join(runs, ", "), thousands(g.Items), strings.Join(seeds, ","), verdict})
	}
	return b.String()
}

// CheckpointIdentity is the identity of the checkpoint a task run ran on
// (task.CheckpointIdentity).
func CheckpointIdentity(f *task.File) string { return task.CheckpointIdentity(f) }

// modelOf names the model a run asked: a short checkpoint identity, else
// the served model's id.
func modelOf(f *task.File) string {
	if id := CheckpointIdentity(f); len(id) >= 12 {
		return "`" + id[:12] + "`"
	}
	return f.Receipts.Server.Model
}

// samplingText is a run's sampling: the preset, else the fields sent,
// else "server defaults" (likelihood scoring samples nothing).
func samplingText(f *task.File) string {
	if f.Task == task.Choice {
		return "likelihood"
	}
	if f.Settings.SamplingPreset != "" {
		return f.Settings.SamplingPreset
	}
	s := f.Settings.Sampling
	var parts []string
	if s.Temperature != nil {
		parts = append(parts, "T "+strconv.FormatFloat(float64(*s.Temperature), 'g', -1, 64))
	}
	if s.TopP != nil {
		parts = append(parts, "top-p "+strconv.FormatFloat(float64(*s.TopP), 'g', -1, 64))
	}
	if s.TopK != nil {
		parts = append(parts, "top-k "+strconv.Itoa(*s.TopK))
	}
	if s.MinP != nil {
		parts = append(parts, "min-p "+strconv.FormatFloat(float64(*s.MinP), 'g', -1, 64))
	}
	if s.RepetitionPenalty != nil {
		parts = append(parts, "rep "+strconv.FormatFloat(float64(*s.RepetitionPenalty), 'g', -1, 64))
	}
	if len(parts) == 0 {
		return "server defaults"
	}
	return strings.Join(parts, ", ")
}

// pct1 is a fraction as a percentage with one decimal.
func pct1(x float64) string { return strconv.FormatFloat(100*x, 'f', 1, 64) }
