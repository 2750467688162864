package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/moonlm/moonlm/internal/settings"
	"github.com/moonlm/moonlm/internal/version"
	"github.com/moonlm/moonlm/kernels"
)

func init() {
	register(&command{
		name:    "version",
		summary: "print the library and ABI versions, the kernel set and how this binary was built (also --version)",
		run:     runVersion,
	})
}

const versionUsage = `usage: moonlm version
       moonlm --version
Prints the library version, the C ABI version, the kernel set this CPU
uses (MOONLM_KERNELS can force another) and the Go toolchain and source
revision this binary was built from.`

func runVersion(args []string) error {
	fs := newFlagSet("version")
	if help, err := parseFlags(fs, versionUsage, args); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr(versionUsage, "unexpected argument %q", fs.Arg(0))
	}
	bi, _ := debug.ReadBuildInfo()
	writeVersion(os.Stdout, bi)
	return nil
}

// writeVersion prints the version report; bi may be nil (no build info).
func writeVersion(w io.Writer, bi *debug.BuildInfo) {
	fmt.Fprintf(w, "moonlm %s (C ABI %d)\n", version.Library, version.ABI)
	ks := kernels.Detect()
	if env := settings.Read(); env.Kernels != nil {
		ks = env.Kernels // MOONLM_KERNELS
	}
	fmt.Fprintf(w, "kernels: %s (this CPU: %s)\n", ks.Name(), strings.Join(kernels.Available(), ", "))
	goVersion := runtime.Version()
	if bi != nil && bi.GoVersion != "" {
		goVersion = bi.GoVersion
	}
	fmt.Fprintf(w, "built with: %s %s/%s\n", goVersion, runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(w, "revision: %s\n", revision(bi))
}

// revision describes the source revision go build stamped into the binary:
// "HASH (modified), TIME", or why there is none.
func revision(bi *debug.BuildInfo) string {
	if bi == nil {
		return "unknown (no build information)"
	}
	var rev, when, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev == "" {
		return "unknown (built outside a git checkout, or with -buildvcs=false)"
	}
	if modified == "true" {
		rev += " (modified)"
	}
	if when != "" {
		rev += ", " + when
	}
	return rev
}
