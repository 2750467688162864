package chat

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// pyFormat is Python's printf-style "fmt % args" for the conversions
// templates use: s, r, d, i, f, e, g, x, X, o, c and %%, with flags, width
// and precision.
func pyFormat(f string, args []value) (value, error) {
	var b sbuf
	ai := 0
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			b.WriteByte(f[i])
			continue
		}
		j := i + 1
		for j < len(f) && strings.IndexByte("-+ #0", f[j]) >= 0 {
			j++
		}
		for j < len(f) && (isDigit(f[j]) || f[j] == '.') {
			j++
		}
		if j >= len(f) {
			return nil, errorf("incomplete format")
		}
		spec, conv := f[i+1:j], f[j]
		i = j
		for _, part := range strings.Split(strings.TrimLeft(spec, "-+ #0"), ".") {
			if len(part) > 4 {
				return nil, errorf("format width or precision %q too large", spec)
			}
		}
		if conv == '%' {
			b.WriteByte('%')
			continue
		}
		if ai >= len(args) {
			return nil, errorf("not enough arguments for format string")
		}
		a := args[ai]
		ai++
		switch conv {
		case 's':
			fmt.Fprintf(&b, "%"+spec+"s", toStr(a))
		case 'r':
			var rb sbuf
			writeRepr(&rb, a, true, 0)
			fmt.Fprintf(&b, "%"+spec+"s", rb.String())
		case 'd', 'i', 'x', 'X', 'o', 'c':
			n, fv, isF, ok := toNumber(a)
			if !ok {
				return nil, errorf("%%%c format: a number is required, not %s", conv, typeName(a))
			}
			if isF {
				n = int64(fv)
			}
			c := conv
			if c == 'i' {
				c = 'd'
			}
			fmt.Fprintf(&b, "%"+spec+string(c), n)
		case 'f', 'F', 'e', 'E', 'g', 'G':
			_, fv, _, ok := toNumber(a)
			if !ok {
				return nil, errorf("%%%c format: a number is required, not %s", conv, typeName(a))
			}
			if !strings.Contains(spec, ".") && (conv == 'f' || conv == 'F' || conv == 'e' || conv == 'E') {
				spec += ".6"
			}
			fmt.Fprintf(&b, "%"+spec+string(conv), fv)
		default:
			return nil, errorf("unsupported format character %q", conv)
		}
		if err := checkLen(b.Len()); err != nil {
			return nil, err
		}
	}
	if ai < len(args) {
		return nil, errorf("not all arguments converted during string formatting")
	}
	return b.String(), nil
}

// strftime formats t with the C/Python directives templates use. It
// appends to a byte slice through small helpers rather than fmt or
// strings.Builder, whose inlined calls made it several times larger.
func strftime(t time.Time, f string) string {
	b := make([]byte, 0, len(f)+16)
	year, month, day := t.Date()
	hour, minute, second := t.Clock()
	for i := 0; i < len(f); i++ {
		c := f[i]
		if c != '%' || i+1 >= len(f) {
			b = append(b, c)
			continue
		}
		i++
		switch f[i] {
		case 'Y':
			b = appendInt(b, year, 4, '0')
		case 'y':
			b = appendInt(b, year%100, 2, '0')
		case 'm':
			b = appendInt(b, int(month), 2, '0')
		case 'd':
			b = appendInt(b, day, 2, '0')
		case 'e':
			b = appendInt(b, day, 2, ' ')
		case '-':
			// %-d, %-m: no padding (glibc extension)
			if i+1 < len(f) {
				i++
				switch f[i] {
				case 'd':
					b = appendInt(b, day, 0, '0')
				case 'm':
					b = appendInt(b, int(month), 0, '0')
				case 'H':
					b = appendInt(b, hour, 0, '0')
				case 'I':
					b = appendInt(b, (hour+11)%12+1, 0, '0')
				default:
					b = append(b, '%', '-', f[i])
				}
			}
		case 'H':
			b = appendInt(b, hour, 2, '0')
		case 'I':
			b = appendInt(b, (hour+11)%12+1, 2, '0')
		case 'M':
			b = appendInt(b, minute, 2, '0')
		case 'S':
			b = appendInt(b, second, 2, '0')
		case 'p':
			if hour < 12 {
				b = append(b, "AM"...)
			} else {
				b = append(b, "PM"...)
			}
		case 'B':
			b = append(b, monthNames[month-1]...)
		case 'b', 'h':
			b = append(b, monthNames[month-1][:3]...)
		case 'A':
			b = append(b, dayNames[t.Weekday()]...)
		case 'a':
			b = append(b, dayNames[t.Weekday()][:3]...)
		case 'j':
			b = appendInt(b, t.YearDay(), 3, '0')
		case 'Z':
			z, _ := t.Zone()
			b = append(b, z...)
		case '%':
			b = append(b, '%')
		default:
			b = append(b, '%', f[i])
		}
	}
	return string(b)
}

// English names, as Python's strftime prints them in the C locale.
var (
	monthNames = [12]string{"January", "February", "March", "April", "May", "June",
		"July", "August", "September", "October", "November", "December"}
	dayNames = [7]string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"}
)

// appendInt appends n in decimal, padded to width with pad as printf's
// %0Nd or %Nd would (a zero-padded minus sign comes first). Not inlined:
// strftime calls it at many places.
//
//go:noinline
func appendInt(b []byte, n, width int, pad byte) []byte {
	var digits [20]byte
	s := strconv.AppendInt(digits[:0], int64(n), 10)
	if pad == '0' && n < 0 {
		b = append(b, '-')
		s = s[1:]
		width--
	}
	for i := len(s); i < width; i++ {
		b = append(b, pad)
	}
	return append(b, s...)
}
