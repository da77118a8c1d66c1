package main

import (
	"fmt"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/lfmq/lfmq/quant"
)

type quantizeOptions struct {
	IO      *IOStreams
	Model   string
	Out     string
	Method  quant.Method
	Experts string
	Workers int
}

func newQuantizeCmd(ios *IOStreams, runF func(*quantizeOptions) error) *cobra.Command {
	opts := &quantizeOptions{IO: ios}
	var method string
	cmd := &cobra.Command{
		Use:   "quantize --model DIR --out DIR [--method rtn]",
		Short: "Quantize a BF16 LFM2-MoE checkpoint to an lfmq-1 checkpoint",
		Long: `Quantize reads a Hugging Face LFM2-MoE checkpoint (BF16 safetensors, single
or sharded) and writes an lfmq-1 checkpoint:

  routed experts                               BFP4 (bfloat4_b)
  attention, short-conv, dense FFN, LM head    BFP8 (bfloat8_b)
  embedding, norms, conv kernels, router        BF16, expert bias F32

--method rtn rounds every block to nearest (the plain BFP packer). The output
directory must not exist or be empty; it appears only when complete. The bytes
written depend only on the input and the method, not on --workers.`,
		Example: "  lfmq quantize --model ./LFM2-8B-A1B --out ./LFM2-8B-A1B-lfmq1 --method rtn",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireFlags("model", opts.Model, "out", opts.Out); err != nil {
				return err
			}
			m, err := quant.ParseMethod(method)
			if err != nil {
				return &usageError{err}
			}
			opts.Method = m
			if opts.Experts != "quantize" && opts.Experts != "keep" {
				return &usageError{fmt.Errorf("--experts must be quantize or keep, got %q", opts.Experts)}
			}
			if opts.Workers < 0 {
				return &usageError{fmt.Errorf("--workers must be 0 (all cores) or positive, got %d", opts.Workers)}
			}
			if runF != nil {
				return runF(opts)
			}
			return quantizeRun(cmd, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Model, "model", "", "source Hugging Face checkpoint directory (required)")
	cmd.Flags().StringVar(&opts.Out, "out", "", "output lfmq-1 checkpoint directory (required)")
	cmd.Flags().StringVar(&method, "method", "rtn", "quantization method for the routed experts: rtn")
	cmd.Flags().StringVar(&opts.Experts, "experts", "quantize", "routed experts: quantize (BFP4 by --method) or keep (BF16, an ablation)")
	cmd.Flags().IntVar(&opts.Workers, "workers", 0, "tensors packed in parallel (0 = all cores)")
	cmd.MarkFlagDirname("model")
	cmd.MarkFlagDirname("out")
	cmd.RegisterFlagCompletionFunc("method", cobra.FixedCompletions([]string{"rtn"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func quantizeRun(cmd *cobra.Command, opts *quantizeOptions) error {
	start := time.Now()
	var prog quant.Progress
	if opts.IO.ErrTTY {
		prog = &barProgress{w: opts.IO}
	}
	res, err := quant.Quantize(cmd.Context(), quant.Options{
		ModelDir:    opts.Model,
		OutDir:      opts.Out,
		Method:      opts.Method,
		Workers:     opts.Workers,
		KeepExperts: opts.Experts == "keep",
		CreatedBy:   createdBy(opts),
		Progress:    prog,
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.Out, "wrote lfmq-1 checkpoint %s\n", res.OutDir)
	fmt.Fprintf(opts.IO.Out, "  tensors         %d\n", res.Tensors)
	fmt.Fprintf(opts.IO.Out, "  size            %s (source %s, %.2fx smaller)\n", humanBytes(res.Bytes), humanBytes(res.SourceBytes), float64(res.SourceBytes)/float64(max(res.Bytes, 1)))
	fmt.Fprintf(opts.IO.Out, "  manifest sha256 %s\n", res.ManifestSHA256)
	fmt.Fprintf(opts.IO.Out, "  time            %s\n", time.Since(start).Round(time.Millisecond))
	return nil
}

// createdBy is the command line recorded in the manifest. Paths are left
// out: they belong to the machine, not the checkpoint, and the manifest must
// not change with where it was written.
func createdBy(opts *quantizeOptions) string {
	s := "lfmq quantize --method " + string(opts.Method)
	if opts.Experts != "quantize" {
		s += " --experts " + opts.Experts
	}
	return s
}

// barProgress draws a progress bar on the error stream of a terminal.
type barProgress struct {
	w   *IOStreams
	mu  sync.Mutex
	bar *progressbar.ProgressBar
}

func (p *barProgress) Start(total int) {
	p.bar = progressbar.NewOptions(total,
		progressbar.OptionSetWriter(p.w.ErrOut),
		progressbar.OptionSetDescription("quantizing"),
		progressbar.OptionShowCount(),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionThrottle(100*time.Millisecond),
	)
}

func (p *barProgress) Done(string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.bar.Add(1)
}

func humanBytes(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.2f %cB", float64(n)/float64(div), "kMGTPE"[exp])
}
