//go:build unix

package launch

import (
	"fmt"
	"os"
	"syscall"
)

// Exec replaces this process with the plan's runtime: what runs is exactly
// the command Command prints, with this process's environment (an
// LFMQ_API_KEY set for launch reaches serve).
func Exec(p *Plan) error {
	argv := append([]string{p.Binary}, p.Args...)
	if err := syscall.Exec(p.Binary, argv, os.Environ()); err != nil {
		return fmt.Errorf("launch: exec %s: %w", p.Binary, err)
	}
	return nil // not reached
}
