package canon

import (
	"encoding/json"
	"strconv"
	"testing"
)

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
