package canon

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// The attacker's inputs: one family per way of making a parser work hard,
// each at growing sizes. A linear parser keeps ns/B flat across sizes.
var families = []struct {
	name string
	gen  func(n int) []byte
}{
	{"huge_exponent", func(n int) []byte { return []byte(`{"a":1e` + strings.Repeat("7", n-9) + `}`) }},
	{"huge_mantissa", func(n int) []byte { return []byte(`{"a":1` + strings.Repeat("3", n-12) + `.5e-7}`) }},
	{"many_numbers", func(n int) []byte {
		var b strings.Builder
		b.WriteString(`[`)
		for i := 0; b.Len() < n-16; i++ {
			fmt.Fprintf(&b, "%d.%de%d,", i, i%97, i%41-20)
		}
		b.WriteString(`0]`)
		return []byte(b.String())
	}},
	{"deep_nesting", func(n int) []byte {
		// The payload at the bottom of nesting as deep as the limit allows:
		// a parser that copies each level into its parent pays depth × size.
		const d = DefaultMaxDepth - 1
		head, tail := strings.Repeat(`{"a":`, d), strings.Repeat(`}`, d)
		return []byte(head + `"` + strings.Repeat("x", n-len(head)-len(tail)-2) + `"` + tail)
	}},
	{"deep_many", func(n int) []byte {
		// Many values, each nested to the limit.
		const d = DefaultMaxDepth - 1
		one := strings.Repeat(`[`, d) + `1` + strings.Repeat(`]`, d)
		var b strings.Builder
		b.WriteString("[")
		for b.Len() < n-len(one)-2 {
			b.WriteString(one)
			b.WriteString(",")
		}
		b.WriteString("0]")
		return []byte(b.String())
	}},
	{"wide_object", func(n int) []byte {
		// About 100 000 keys per MiB, in an order far from sorted.
		var b strings.Builder
		b.WriteString("{")
		for i := 0; b.Len() < n-16; i++ {
			fmt.Fprintf(&b, `"%x":%d,`, uint32(i)*2654435761, i%10)
		}
		b.WriteString(`"":0}`)
		return []byte(b.String())
	}},
	{"escaped_strings", func(n int) []byte {
		var b strings.Builder
		b.WriteString(`{"s":"`)
		for b.Len() < n-40 {
			b.WriteString(`\u00e9\n\"\\é\ud83d\ude00 x`)
		}
		b.WriteString(`"}`)
		return []byte(b.String())
	}},
}

var sizes = []int{64 << 10, 256 << 10, 1 << 20, 4 << 20}

func sizeName(n int) string {
	if n >= 1<<20 {
		return strconv.Itoa(n>>20) + "MiB"
	}
	return strconv.Itoa(n>>10) + "KiB"
}

func reportPerByte(b *testing.B, n int) {
	b.SetBytes(int64(n))
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/B")
}

// BenchmarkCanonical runs the new and the old Canonical on every family and
// size, side by side. The old one is quadratic in some families, so it is
// run only up to 1 MiB (at 4 MiB its huge exponent alone takes ~45 s).
func BenchmarkCanonical(b *testing.B) {
	for _, f := range families {
		for _, n := range sizes {
			in := f.gen(n)
			if _, err := Canonical(in); err != nil {
				b.Fatalf("%s: %v", f.name, err)
			}
			b.Run(f.name+"/"+sizeName(n)+"/new", func(b *testing.B) {
				for b.Loop() {
					Canonical(in)
				}
				reportPerByte(b, len(in))
			})
			if n > 1<<20 {
				continue
			}
			b.Run(f.name+"/"+sizeName(n)+"/old", func(b *testing.B) {
				for b.Loop() {
					oldCanonical(in)
				}
				reportPerByte(b, len(in))
			})
		}
	}
}

// BenchmarkCheck runs Check and json.Valid on every family and size.
func BenchmarkCheck(b *testing.B) {
	for _, f := range families {
		for _, n := range sizes {
			in := f.gen(n)
			b.Run(f.name+"/"+sizeName(n)+"/Check", func(b *testing.B) {
				for b.Loop() {
					if err := Check(in, Limits{}); err != nil {
						b.Fatal(err)
					}
				}
				reportPerByte(b, len(in))
			})
			b.Run(f.name+"/"+sizeName(n)+"/json.Valid", func(b *testing.B) {
				for b.Loop() {
					json.Valid(in)
				}
				reportPerByte(b, len(in))
			})
		}
	}
}

// toolsCall is a typical tools/call body (about 200 bytes).
var toolsCall = []byte(`{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"delete_project","arguments":{"project":"alpha-7","force":true,"limit":50,"filters":{"labels":["bug","p1"],"since":"2026-07-01"}},"_meta":{"progressToken":"t-17"}}}`)

// BenchmarkCheckSmall is the hot path: one tools/call body.
func BenchmarkCheckSmall(b *testing.B) {
	b.Run("Check", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(toolsCall)))
		for b.Loop() {
			if err := Check(toolsCall, Limits{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("CheckFoldCase", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(toolsCall)))
		for b.Loop() {
			if err := Check(toolsCall, Limits{FoldCase: true}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json.Valid", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(toolsCall)))
		for b.Loop() {
			json.Valid(toolsCall)
		}
	})
}

// args are the arguments of toolsCall.
var args = []byte(`{"project":"alpha-7","force":true,"limit":50,"filters":{"labels":["bug","p1"],"since":"2026-07-01"}}`)

func BenchmarkCanonicalSmall(b *testing.B) {
	b.Run("new", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Canonical(args); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("old", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := oldCanonical(args); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkDescribe runs Describe on every family and size.
func BenchmarkDescribe(b *testing.B) {
	for _, f := range families {
		for _, n := range sizes {
			in := f.gen(n)
			b.Run(f.name+"/"+sizeName(n), func(b *testing.B) {
				for b.Loop() {
					Describe(in, DescribeOptions{})
				}
				reportPerByte(b, len(in))
			})
		}
	}
	b.Run("tool_arguments", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Describe(args, DescribeOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
