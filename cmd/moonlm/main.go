// Command moonlm is the command-line front end of the moonlm inference
// engine: inspect GGUF files, tokenize, generate, chat, measure perplexity
// and benchmark.
package main

import (
	"fmt"
	"io"
	"os"
	"sort"
)

// command is one subcommand. Each lives in its own file and registers itself
// from init, so subcommands can be added without touching this file. Every
// run handles -h/--help by printing its help to stdout, which is also what
// "moonlm help NAME" prints.
type command struct {
	name    string
	summary string
	run     func(args []string) error
}

var commands = map[string]*command{}

func register(c *command) { commands[c.name] = c }

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: moonlm COMMAND [options]\n       moonlm help COMMAND\n       moonlm --version\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-16s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\n\"moonlm help COMMAND\" or \"moonlm COMMAND --help\" describes a command and its options.")
}

func main() { os.Exit(runMain(os.Args[1:])) }

// runMain runs the command line args (without the program name) and returns
// the exit status: 0, 1 when the command failed, 2 for a usage error.
func runMain(args []string) int {
	if len(args) == 0 {
		usage(os.Stderr)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help":
		usage(os.Stdout)
		return 0
	case "-version", "--version":
		args = []string{"version"}
	case "help":
		if len(args) == 1 {
			usage(os.Stdout)
			return 0
		}
		c, ok := commands[args[1]]
		if !ok || len(args) > 2 {
			fmt.Fprintf(os.Stderr, "moonlm help: unknown command %q\n", args[1])
			usage(os.Stderr)
			return 2
		}
		args = []string{c.name, "--help"}
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(os.Stderr, "moonlm: unknown command %q\n", args[0])
		usage(os.Stderr)
		return 2
	}
	if err := c.run(args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "moonlm %s: %v\n", c.name, err)
		return 1
	}
	return 0
}
