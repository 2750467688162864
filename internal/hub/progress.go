package hub

import (
	"fmt"
	"io"
	"time"
)

// NewProgress returns a Config.Progress that reports to w: on a terminal
// (tty) one line redrawn in place with the bytes, the rate and the time
// left; otherwise a plain line every few seconds and one at the end, so
// that logs stay readable.
func NewProgress(w io.Writer, tty bool) func(file string, done, total int64) {
	p := &progress{w: w, tty: tty, now: time.Now}
	return p.report
}

type progress struct {
	w     io.Writer
	tty   bool
	now   func() time.Time
	file  string
	start time.Time
	from  int64 // bytes already there when this download began (resumed)
	last  time.Time
}

// plainEvery is how often a plain line is written when not on a terminal.
const plainEvery = 5 * time.Second

func (p *progress) report(file string, done, total int64) {
	now := p.now()
	if file != p.file {
		p.file, p.start, p.from, p.last = file, now, done, time.Time{}
	}
	finished := total >= 0 && done >= total
	if !p.tty && !finished && !p.last.IsZero() && now.Sub(p.last) < plainEvery {
		return
	}
	p.last = now
	line := p.line(done, total, now)
	if p.tty {
		end := ""
		if finished {
			end = "\n"
		}
		fmt.Fprintf(p.w, "\r\x1b[K%s%s", line, end)
		return
	}
	fmt.Fprintln(p.w, line)
}

// line is "FILE  12.0 MiB / 100.0 MiB  12%  3.1 MiB/s  ETA 0:28".
func (p *progress) line(done, total int64, now time.Time) string {
	elapsed := now.Sub(p.start).Seconds()
	rate := 0.0
	if elapsed > 0 {
		rate = float64(done-p.from) / elapsed
	}
	s := fmt.Sprintf("%s  %s", p.file, Bytes(done))
	if total >= 0 {
		pct := 100.0
		if total > 0 {
			pct = 100 * float64(done) / float64(total)
		}
		s += fmt.Sprintf(" / %s  %3.0f%%", Bytes(total), pct)
	}
	s += fmt.Sprintf("  %s/s", Bytes(int64(rate)))
	if total >= 0 && done < total && rate > 0 {
		s += "  ETA " + clock(time.Duration(float64(total-done)/rate*float64(time.Second)))
	} else if total >= 0 && done >= total {
		s += "  done in " + clock(now.Sub(p.start))
	}
	return s
}

// Bytes is n in B, KiB, MiB or GiB with one decimal.
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, u := float64(n)/unit, "KiB"
	for _, next := range []string{"MiB", "GiB", "TiB"} {
		if v < unit {
			break
		}
		v, u = v/unit, next
	}
	return fmt.Sprintf("%.1f %s", v, u)
}

// clock is d as M:SS or H:MM:SS.
func clock(d time.Duration) string {
	s := int64(d.Round(time.Second) / time.Second)
	if s >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}
