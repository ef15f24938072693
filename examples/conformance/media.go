package main

import (
	"bytes"
	"encoding/binary"
	"image"
	"image/color"
	"image/png"
)

// The binary fixtures, built once at start-up rather than pasted as base64
// so that anyone can see what they hold.
var (
	redPixelPNG = onePixelPNG(color.NRGBA{R: 255, A: 255})
	silenceWAV  = silentWAV(8000, 8) // 8 samples of 16-bit mono silence at 8 kHz
)

// onePixelPNG encodes a 1×1 image of colour c.
func onePixelPNG(c color.Color) []byte {
	img := image.NewNRGBA(image.Rect(0, 0, 1, 1))
	img.Set(0, 0, c)
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		panic(err) // cannot happen with an in-memory image
	}
	return b.Bytes()
}

// silentWAV returns a RIFF/WAVE file of n samples of 16-bit mono PCM
// silence at the given sample rate.
func silentWAV(rate, n uint32) []byte {
	data := make([]byte, 2*n)
	le := binary.LittleEndian
	b := make([]byte, 0, 44+len(data))
	b = append(b, "RIFF"...)
	b = le.AppendUint32(b, uint32(36+len(data))) // size of what follows
	b = append(b, "WAVE"...)
	b = append(b, "fmt "...)
	b = le.AppendUint32(b, 16)     // fmt chunk size
	b = le.AppendUint16(b, 1)      // PCM
	b = le.AppendUint16(b, 1)      // channels
	b = le.AppendUint32(b, rate)   // sample rate
	b = le.AppendUint32(b, rate*2) // byte rate
	b = le.AppendUint16(b, 2)      // block align
	b = le.AppendUint16(b, 16)     // bits per sample
	b = append(b, "data"...)
	b = le.AppendUint32(b, uint32(len(data)))
	return append(b, data...)
}
