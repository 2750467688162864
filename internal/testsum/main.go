// Command testsum condenses one part of `make test` into a summary: how many
// tests passed, failed and were skipped, and why they were skipped, so that
// skips stay visible without reading the whole log.
//
//	go test -json ./... | testsum -part Go -record build/test-results/Go.txt
//	testsum -part Python -junit build/test-results/python.xml -record ...
//
// With -go (the default) it reads `go test -json` on stdin and prints a
// compact log as it goes (package results and the output of failing tests
// and packages); with -junit it reads a JUnit XML report (pytest
// --junitxml, node --test-reporter=junit). -record also writes the summary
// to a file, which `make test` prints again at the end; -skip adds a step
// that was skipped outside the tests (arm64 binaries without qemu). It exits 1 if any
// test or package failed, or if the report cannot be read.
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// result is what one part's tests came to.
type result struct {
	passed, failed, skipped int
	failedPkgs              []string // packages that failed outside any test (build, panic, timeout)
	failedNames             []string
	skips                   map[string][]string // reason -> names of the tests skipped for it
	elapsed                 time.Duration
}

func newResult() *result { return &result{skips: map[string][]string{}} }

func (r *result) skip(name, reason string) {
	if reason == "" {
		reason = "(no reason given)"
	}
	r.skips[reason] = append(r.skips[reason], name)
	r.skipped++
}

func (r *result) ok() bool { return r.failed == 0 && len(r.failedPkgs) == 0 }

// maxReasons bounds the skip reasons listed; maxReasonLen their length.
const (
	maxReasons   = 15
	maxReasonLen = 200
)

// summary is the part's summary line followed by one indented line per
// distinct skip reason (most frequent first) and the failures.
func (r *result) summary(part string) string {
	var b strings.Builder
	status := "ok"
	if !r.ok() {
		status = "FAILED"
	}
	fmt.Fprintf(&b, "%-9s %-6s %d passed, %d failed, %d skipped", part+":", status, r.passed, r.failed, r.skipped)
	if len(r.failedPkgs) > 0 {
		fmt.Fprintf(&b, ", %d package(s) failed outside a test", len(r.failedPkgs))
	}
	if r.elapsed > 0 {
		fmt.Fprintf(&b, " (%s)", r.elapsed.Round(time.Second))
	}
	b.WriteByte('\n')
	for i, n := range r.failedNames {
		if i == maxReasons {
			fmt.Fprintf(&b, "    ... and %d more failures (see the log above)\n", len(r.failedNames)-i)
			break
		}
		fmt.Fprintf(&b, "    failed: %s\n", n)
	}
	for _, p := range r.failedPkgs {
		fmt.Fprintf(&b, "    failed: package %s\n", p)
	}
	reasons := make([]string, 0, len(r.skips))
	for k := range r.skips {
		reasons = append(reasons, k)
	}
	slices.SortFunc(reasons, func(a, b string) int {
		return cmp.Or(len(r.skips[b])-len(r.skips[a]), strings.Compare(a, b))
	})
	for i, reason := range reasons {
		if i == maxReasons {
			fmt.Fprintf(&b, "    ... and %d more skip reasons (see the log above)\n", len(reasons)-i)
			break
		}
		names := r.skips[reason]
		who := names[0]
		if len(names) > 1 {
			who = fmt.Sprintf("%d tests, e.g. %s", len(names), names[0])
		}
		if len(reason) > maxReasonLen {
			reason = reason[:maxReasonLen] + "..."
		}
		fmt.Fprintf(&b, "    skipped: %s [%s]\n", reason, who)
	}
	return b.String()
}

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action      string
	Package     string
	Test        string
	Output      string
	Elapsed     float64
	ImportPath  string
	FailedBuild string
}

// goTest is the state of one test while its events arrive.
type goTest struct {
	pkg, name string
	output    []string
	action    string
}

// logLine is "    file_test.go:12: message", as testing prints t.Log/t.Skip.
var logLine = regexp.MustCompile(`^\s{4}[\w.\-]+\.go:\d+: (.*)$`)

// skipReason is the first line of the last message the test logged before
// it was skipped (t.Skip's argument).
func skipReason(output []string) string {
	reason := ""
	for _, l := range output {
		if m := logLine.FindStringSubmatch(strings.TrimRight(l, "\n")); m != nil {
			reason = strings.TrimSpace(m[1])
		}
	}
	return reason
}

// readGo consumes `go test -json` from in, echoing a compact log to log.
func readGo(in io.Reader, log io.Writer) (*result, error) {
	r := newResult()
	start := time.Now()
	defer func() { r.elapsed = time.Since(start) }()
	tests := map[string]*goTest{}
	var order []*goTest
	pkgOutput := map[string][]string{}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintf(log, "%s\n", line) // not an event: go's own messages
			continue
		}
		switch {
		case e.Action == "build-output":
			fmt.Fprint(log, e.Output)
		case e.Action == "build-fail":
			// reported again by the package's fail event
		case e.Test == "":
			switch e.Action {
			case "output":
				pkgOutput[e.Package] = append(pkgOutput[e.Package], e.Output)
			case "pass":
				fmt.Fprintf(log, "ok   %s %.1fs\n", e.Package, e.Elapsed)
			case "fail":
				for _, l := range pkgOutput[e.Package] {
					fmt.Fprint(log, l)
				}
				r.failedPkgs = append(r.failedPkgs, e.Package)
			}
			if e.Action != "output" {
				delete(pkgOutput, e.Package)
			}
		default:
			key := e.Package + "\x00" + e.Test
			t := tests[key]
			if t == nil {
				t = &goTest{pkg: e.Package, name: e.Test}
				tests[key] = t
				order = append(order, t)
			}
			switch e.Action {
			case "output":
				t.output = append(t.output, e.Output)
			case "pass", "fail", "skip":
				t.action = e.Action
				if e.Action == "fail" {
					for _, l := range t.output {
						fmt.Fprint(log, l)
					}
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return r, fmt.Errorf("reading go test -json: %w", err)
	}
	// Count the leaves; a parent counts only if it failed with no failed
	// subtest (the failure was in its own body).
	parent := map[string]bool{}
	failedBelow := map[string]bool{}
	for _, t := range order {
		for i := strings.LastIndexByte(t.name, '/'); i >= 0; i = strings.LastIndexByte(t.name[:i], '/') {
			k := t.pkg + "\x00" + t.name[:i]
			parent[k] = true
			if t.action == "fail" {
				failedBelow[k] = true
			}
		}
	}
	failedPkg := map[string]bool{}
	for _, p := range r.failedPkgs {
		failedPkg[p] = true
	}
	for _, t := range order {
		k := t.pkg + "\x00" + t.name
		name := shortPkg(t.pkg) + "." + t.name
		switch {
		case t.action == "fail" && !failedBelow[k]:
			r.failed++
			r.failedNames = append(r.failedNames, name)
		case parent[k]:
		case t.action == "pass":
			r.passed++
		case t.action == "skip":
			r.skip(name, skipReason(t.output))
		case t.action == "" && failedPkg[t.pkg]:
			// still running when its package died (panic, timeout)
			r.failed++
			r.failedNames = append(r.failedNames, name+" (did not finish)")
		}
	}
	// The packages are already listed by their failing tests.
	r.failedPkgs = slices.DeleteFunc(r.failedPkgs, func(p string) bool {
		return slices.ContainsFunc(r.failedNames, func(n string) bool { return strings.HasPrefix(n, shortPkg(p)+".") })
	})
	return r, nil
}

// shortPkg drops the module path from a package's import path.
func shortPkg(p string) string {
	if s, ok := strings.CutPrefix(p, "github.com/moonlm/moonlm/"); ok {
		return s
	}
	return p
}

// readJUnit counts the testcase elements of a JUnit XML report.
func readJUnit(in io.Reader) (*result, error) {
	r := newResult()
	d := xml.NewDecoder(in)
	var name string
	var failed, skipped bool
	var reason string
	inCase := false
	seen := false
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return r, fmt.Errorf("reading JUnit XML: %w", err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			switch el.Name.Local {
			case "testsuites", "testsuite":
				seen = true
			case "testcase":
				seen = true
				inCase, failed, skipped, reason = true, false, false, ""
				var class string
				for _, a := range el.Attr {
					switch a.Name.Local {
					case "name":
						name = a.Value
					case "classname":
						class = a.Value
					}
				}
				if class != "" && class != "test" {
					name = class + "." + name
				}
			case "failure", "error":
				if inCase {
					failed = true
				}
			case "skipped":
				if inCase {
					skipped = true
					for _, a := range el.Attr {
						if a.Name.Local == "message" {
							reason = a.Value
						}
					}
				}
			}
		case xml.EndElement:
			if el.Name.Local == "testcase" && inCase {
				inCase = false
				switch {
				case failed:
					r.failed++
					r.failedNames = append(r.failedNames, name)
				case skipped:
					r.skip(name, cleanPytestReason(reason))
				default:
					r.passed++
				}
			}
		}
	}
	if !seen {
		return r, errors.New("no test suites in the JUnit XML report")
	}
	return r, nil
}

// cleanPytestReason drops pytest's "Skipped: " prefix from a skip message.
func cleanPytestReason(s string) string {
	s, _ = strings.CutPrefix(s, "Skipped: ")
	return strings.TrimSpace(s)
}

func main() {
	part := flag.String("part", "Go", "name of the part, printed first on the summary line")
	junit := flag.String("junit", "", "read this JUnit XML report instead of go test -json on stdin")
	record := flag.String("record", "", "also write the summary to this file")
	var extraSkips []string
	flag.Func("skip", "`name=reason`: count one more skipped test (for steps that are not Go tests); repeatable",
		func(v string) error {
			if _, _, ok := strings.Cut(v, "="); !ok {
				return errors.New("want name=reason")
			}
			extraSkips = append(extraSkips, v)
			return nil
		})
	flag.Parse()

	var r *result
	var err error
	if *junit != "" {
		var f *os.File
		if f, err = os.Open(*junit); err == nil {
			r, err = readJUnit(f)
			f.Close()
		}
	} else {
		r, err = readGo(os.Stdin, os.Stdout)
	}
	if r == nil {
		r = newResult()
	}
	for _, v := range extraSkips {
		name, reason, _ := strings.Cut(v, "=")
		r.skip(name, reason)
	}
	s := r.summary(*part)
	if err != nil {
		s = fmt.Sprintf("%-9s FAILED %v\n", *part+":", err)
	}
	fmt.Print("\n" + s)
	if *record != "" {
		werr := os.MkdirAll(filepath.Dir(*record), 0o755)
		if werr == nil {
			werr = os.WriteFile(*record, []byte(s), 0o644)
		}
		if werr != nil {
			fmt.Fprintf(os.Stderr, "testsum: %v\n", werr)
			os.Exit(1)
		}
	}
	if err != nil || !r.ok() {
		os.Exit(1)
	}
}
