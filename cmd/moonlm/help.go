package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"sort"
	"strings"
)

// newFlagSet returns a flag set that reports errors instead of exiting.
// The flag package accepts -name and --name alike; help spells one-letter
// options -x and longer ones --name, as the usage lines do.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseFlags parses args; for -h or --help it prints usage and the options
// to stdout and reports help.
func parseFlags(fs *flag.FlagSet, usage string, args []string) (help bool, err error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printHelp(os.Stdout, usage, fs)
			return true, nil
		}
		return false, fmt.Errorf("%s\n%s", flagError(err), usageLines(usage))
	}
	return false, nil
}

// flagError rewrites the flag package's messages, which write every option
// with one dash, in the spelling help uses.
func flagError(err error) string {
	msg := err.Error()
	for _, pre := range []string{"flag provided but not defined: -", "flag needs an argument: -"} {
		if name, ok := strings.CutPrefix(msg, pre); ok {
			what := "unknown option "
			if !strings.HasPrefix(pre, "flag provided") {
				what = "missing value for "
			}
			return what + flagSpelling(name)
		}
	}
	// invalid value "x" for flag -name: reason
	if i := strings.Index(msg, " for flag -"); i >= 0 && strings.HasPrefix(msg, "invalid ") {
		rest := msg[i+len(" for flag -"):]
		if name, reason, ok := strings.Cut(rest, ": "); ok {
			return flagSpelling(name) + ": " + msg[:i] + ": " + reason
		}
	}
	return msg
}

// usageErr is an error followed by the command's usage lines.
func usageErr(usage, format string, args ...any) error {
	return fmt.Errorf("%s\n%s", fmt.Sprintf(format, args...), usageLines(usage))
}

// usageLines is the synopsis at the top of a usage text: its "usage:" line
// and the indented lines continuing it, without the description.
func usageLines(usage string) string {
	lines := strings.Split(usage, "\n")
	n := 1
	for n < len(lines) && strings.HasPrefix(lines[n], " ") {
		n++
	}
	more := "moonlm help"
	if f := strings.Fields(lines[0]); len(f) > 2 && f[1] == "moonlm" {
		more += " " + f[2]
	}
	return strings.Join(lines[:n], "\n") + "\n(" + more + " says more)"
}

// printHelp writes usage and then the options of fs, aliases on one line.
func printHelp(w io.Writer, usage string, fs *flag.FlagSet) {
	fmt.Fprintln(w, strings.TrimRight(usage, "\n"))
	lines := flagLines(fs)
	if len(lines) == 0 {
		return
	}
	fmt.Fprintln(w, "\noptions:")
	width := 0
	for _, l := range lines {
		width = max(width, len(l[0]))
	}
	width = min(width, 26)
	for _, l := range lines {
		if len(l[0]) > width {
			fmt.Fprintf(w, "  %s\n  %-*s  %s\n", l[0], width, "", l[1])
		} else {
			fmt.Fprintf(w, "  %-*s  %s\n", width, l[0], l[1])
		}
	}
}

// flagSpelling is how help and usage lines write an option name.
func flagSpelling(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// flagLines returns each option's left column ("-m, --model FILE") and
// description, sorted by the first name. Flags bound to the same variable
// are aliases and share a line; the description is the one that is set.
func flagLines(fs *flag.FlagSet) [][2]string {
	type group struct {
		flags []*flag.Flag
	}
	var groups []*group
	byVar := map[uintptr]*group{}
	fs.VisitAll(func(f *flag.Flag) {
		v := reflect.ValueOf(f.Value)
		if v.Kind() == reflect.Pointer {
			if g, ok := byVar[v.Pointer()]; ok {
				g.flags = append(g.flags, f)
				return
			}
		}
		g := &group{flags: []*flag.Flag{f}}
		groups = append(groups, g)
		if v.Kind() == reflect.Pointer {
			byVar[v.Pointer()] = g
		}
	})
	var out [][2]string
	for _, g := range groups {
		sort.SliceStable(g.flags, func(i, j int) bool { return len(g.flags[i].Name) < len(g.flags[j].Name) })
		var names []string
		var placeholder, desc, def string
		for _, f := range g.flags {
			names = append(names, flagSpelling(f.Name))
			if f.Usage == "" {
				continue
			}
			placeholder, desc = flag.UnquoteUsage(f)
			def = f.DefValue
		}
		left := strings.Join(names, ", ")
		if placeholder != "" {
			left += " " + strings.ToUpper(placeholder)
		}
		if def != "" && def != "0" && def != "false" && !strings.Contains(desc, "default") {
			desc += " (default " + def + ")"
		}
		out = append(out, [2]string{left, desc})
	}
	sort.SliceStable(out, func(i, j int) bool {
		return strings.TrimLeft(out[i][0], "-") < strings.TrimLeft(out[j][0], "-")
	})
	return out
}
