package transport

// Compressed responses: what users ask for (Accept-Encoding, as browsers
// send it) and how a compressed body is decoded for the scenario, bounded
// by the body limit so that a small bomb cannot grow into gigabytes.

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"fmt"
	"io"
	"sync"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"
)

// acceptEncoding is what users ask for unless compression is off: what
// Chrome and Firefox send.
const acceptEncoding = "gzip, deflate, br, zstd"

// coding is a response's Content-Encoding.
type coding uint8

const (
	identity coding = iota
	gzipCoding
	deflateCoding
	brCoding
	zstdCoding
	// otherCoding is one headroom does not decode, or several in a row:
	// the body is left as it came.
	otherCoding
)

var codingNames = [...]string{"identity", "gzip", "deflate", "br", "zstd", "other"}

func (c coding) String() string { return codingNames[c] }

// parseCoding reads a Content-Encoding value.
func parseCoding(v []byte) coding {
	switch {
	case len(v) == 0 || equalFold(v, "identity"):
		return identity
	case equalFold(v, "gzip") || equalFold(v, "x-gzip"):
		return gzipCoding
	case equalFold(v, "deflate"):
		return deflateCoding
	case equalFold(v, "br"):
		return brCoding
	case equalFold(v, "zstd"):
		return zstdCoding
	}
	return otherCoding
}

// Decoders are kept between responses: a gzip or deflate reader holds
// ~40 KB of state, a zstd one more.
var (
	gzipReaders  sync.Pool // *gzip.Reader
	flateReaders sync.Pool // io.ReadCloser that is a flate.Resetter
	zlibReaders  sync.Pool // io.ReadCloser that is a zlib.Resetter
	brReaders    sync.Pool // *brotli.Reader
	zstdReaders  sync.Pool // *zstd.Decoder
)

// decode returns body decoded from c, at most limit bytes of it.
func decode(c coding, body []byte, limit int) ([]byte, error) {
	src := bytes.NewReader(body)
	var (
		r   io.Reader
		err error
	)
	switch c {
	case gzipCoding:
		zr, _ := gzipReaders.Get().(*gzip.Reader)
		if zr == nil {
			zr, err = gzip.NewReader(src)
		} else {
			err = zr.Reset(src)
		}
		if err != nil {
			return nil, fmt.Errorf("gzip body: %w", err)
		}
		defer gzipReaders.Put(zr)
		r = zr
	case deflateCoding:
		// RFC 9110's deflate is zlib's format; some servers send the raw
		// deflate stream, which browsers read too.
		if len(body) >= 2 && (uint16(body[0])<<8|uint16(body[1]))%31 == 0 && body[0]&0x0f == 8 {
			zr, _ := zlibReaders.Get().(io.ReadCloser)
			if zr == nil {
				zr, err = zlib.NewReader(src)
			} else {
				err = zr.(zlib.Resetter).Reset(src, nil)
			}
			if err != nil {
				return nil, fmt.Errorf("deflate body: %w", err)
			}
			defer zlibReaders.Put(zr)
			r = zr
			break
		}
		fr, _ := flateReaders.Get().(io.ReadCloser)
		if fr == nil {
			fr = flate.NewReader(src)
		} else {
			fr.(flate.Resetter).Reset(src, nil)
		}
		defer flateReaders.Put(fr)
		r = fr
	case brCoding:
		br, _ := brReaders.Get().(*brotli.Reader)
		if br == nil {
			br = brotli.NewReader(src)
		} else if err := br.Reset(src); err != nil {
			return nil, fmt.Errorf("br body: %w", err)
		}
		defer brReaders.Put(br)
		r = br
	case zstdCoding:
		zd, _ := zstdReaders.Get().(*zstd.Decoder)
		if zd == nil {
			// RFC 9659: HTTP's zstd windows are 8 MiB at most, which
			// bounds what a frame can make the decoder hold.
			zd, err = zstd.NewReader(src, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true), zstd.WithDecoderMaxWindow(8<<20))
		} else {
			err = zd.Reset(src)
		}
		if err != nil {
			return nil, fmt.Errorf("zstd body: %w", err)
		}
		defer func() {
			zd.Reset(nil) // lets go of body
			zstdReaders.Put(zd)
		}()
		r = zd
	default:
		return body, nil
	}
	out, err := readBody(r, 4*len(body), limit, " once decoded")
	if err != nil {
		return nil, fmt.Errorf("%v body: %w", c, err)
	}
	return out, nil
}
