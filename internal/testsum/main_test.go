package main

import (
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Events as go test -json writes them: a skip with its reason, a parent
// whose subtest failed, a parent that failed in its own body, a package
// that died while a test ran, and a package that did not build.
const goEvents = `{"Action":"run","Package":"m/a","Test":"TestSkip"}
{"Action":"output","Package":"m/a","Test":"TestSkip","Output":"    a_test.go:4: first\n"}
{"Action":"output","Package":"m/a","Test":"TestSkip","Output":"    a_test.go:4: no model here\n"}
{"Action":"output","Package":"m/a","Test":"TestSkip","Output":"--- SKIP: TestSkip (0.00s)\n"}
{"Action":"skip","Package":"m/a","Test":"TestSkip"}
{"Action":"run","Package":"m/a","Test":"TestParent"}
{"Action":"run","Package":"m/a","Test":"TestParent/x"}
{"Action":"pass","Package":"m/a","Test":"TestParent/x"}
{"Action":"run","Package":"m/a","Test":"TestParent/y"}
{"Action":"fail","Package":"m/a","Test":"TestParent/y"}
{"Action":"fail","Package":"m/a","Test":"TestParent"}
{"Action":"run","Package":"m/a","Test":"TestBody"}
{"Action":"run","Package":"m/a","Test":"TestBody/x"}
{"Action":"pass","Package":"m/a","Test":"TestBody/x"}
{"Action":"fail","Package":"m/a","Test":"TestBody"}
{"Action":"fail","Package":"m/a"}
{"Action":"run","Package":"m/b","Test":"TestRunning"}
{"Action":"output","Package":"m/b","Output":"panic: test timed out\n"}
{"Action":"fail","Package":"m/b"}
{"Action":"fail","Package":"m/c"}
{"Action":"run","Package":"m/d","Test":"TestOK"}
{"Action":"pass","Package":"m/d","Test":"TestOK"}
{"Action":"pass","Package":"m/d"}
`

func TestReadGo(t *testing.T) {
	var log strings.Builder
	r, err := readGo(strings.NewReader(goEvents), &log)
	require.NoError(t, err)
	assert.Equal(t, 3, r.passed, "TestParent/x, TestBody/x, TestOK; parents do not count")
	assert.Equal(t, []string{"m/a.TestParent/y", "m/a.TestBody", "m/b.TestRunning (did not finish)"}, r.failedNames)
	assert.Equal(t, []string{"m/c"}, r.failedPkgs, "only the package with no failed test is listed as a package")
	assert.Equal(t, map[string][]string{"no model here": {"m/a.TestSkip"}}, r.skips)
	assert.False(t, r.ok())
	assert.Contains(t, log.String(), "panic: test timed out", "a failed package's own output is shown")
	s := r.summary("Go")
	assert.Contains(t, s, "FAILED 3 passed, 3 failed, 1 skipped, 1 package(s) failed")
	assert.Contains(t, s, "skipped: no model here [m/a.TestSkip]")
}

func TestReadGoAllPass(t *testing.T) {
	r, err := readGo(strings.NewReader(`{"Action":"pass","Package":"m/d","Test":"TestOK"}`+"\n"), io.Discard)
	require.NoError(t, err)
	assert.True(t, r.ok())
	assert.Equal(t, 1, r.passed)
}

func TestReadJUnit(t *testing.T) {
	const report = `<?xml version="1.0"?><testsuites><testsuite name="pytest">
<testcase classname="tests.test_a" name="test_ok"/>
<testcase classname="tests.test_a" name="test_skip"><skipped type="pytest.skip" message="Skipped: no numpy">x</skipped></testcase>
<testcase classname="tests.test_a" name="test_fail"><failure message="assert 1 == 2">trace</failure></testcase>
<testcase classname="tests.test_a" name="test_error"><error message="fixture broke"/></testcase>
</testsuite></testsuites>`
	r, err := readJUnit(strings.NewReader(report))
	require.NoError(t, err)
	assert.Equal(t, 1, r.passed)
	assert.Equal(t, []string{"tests.test_a.test_fail", "tests.test_a.test_error"}, r.failedNames)
	assert.Equal(t, map[string][]string{"no numpy": {"tests.test_a.test_skip"}}, r.skips)

	_, err = readJUnit(strings.NewReader("not xml at all"))
	assert.Error(t, err, "a report that is not JUnit XML fails the part")
}
