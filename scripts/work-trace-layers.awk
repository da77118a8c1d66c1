# work-trace-layers.awk: each layer's CPU time by kind of work, from a
# quantize run's work trace (LFMQ_WORK_TRACE; scripts/bench-quantize.sh
# keeps one beside each log, internal/progress/testdata/worktrace holds recorded
# ones), so that a layer's cost can be split into what grows with the
# calibration tokens (forward, statistics) and what does not (solves):
#
#   awk -F'\t' -f scripts/work-trace-layers.awk TRACE
#
# The trace does not name layers: a new layer starts at the first forward
# report after other work, and the head's kinds go to "head". A dense
# file's statistics and solves run after the MoE layer below them, so they
# count with that layer (layer 0 is the first dense file's alone).
$1 == "kind" { name[$2] = $3; nk++ }
$1 == "work" {
	k = $3
	if (k == 1 && prev != 1) layer++
	l = (name[k] ~ /head/) ? "head" : "layer " (layer + 0)
	if (!(l in seen)) { seen[l] = 1; order[n++] = l }
	c = $5 - last; last = $5
	cpu[l, k] += c; tot[l] += c
	wall[l] += $2 - lastw; lastw = $2
	prev = k
}
END {
	for (i = 0; i < n; i++) {
		l = order[i]
		printf "  %-8s wall %7.1f s, CPU %7.1f s:", l, wall[l], tot[l]
		for (k = 0; k < nk; k++) if (cpu[l, k] > 0) printf "  %s %.1f", name[k], cpu[l, k]
		printf "\n"
	}
}
