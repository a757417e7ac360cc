package result

import hdr "github.com/HdrHistogram/hdrhistogram-go"

const hdrV2 = hdr.V2CompressedEncodingCookieBase

func decode(s string) (*hdr.Histogram, error) { return hdr.Decode([]byte(s)) }
