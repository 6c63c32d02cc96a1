package sqlite

import (
	"sync"
	"time"

	"github.com/runstream/runstream/runevents"
)

// parseCreatedAt decodes a created_at column, written with
// runevents.CreatedAtLayout, into the time the writer gave: same instant,
// same offset, in UTC when the offset is zero and in an unnamed fixed zone
// otherwise. It is time.Parse for that one layout, without its cost per
// row; other texts go to time.Parse.
func parseCreatedAt(s string) (time.Time, error) {
	t, offset, ok := canonicalCreatedAt(s)
	if !ok {
		return parseCreatedAtSlow(s)
	}
	return inOffsetZone(t.Add(-time.Duration(offset)*time.Second), offset), nil
}

// canonicalCreatedAt reports whether s is a time as
// runevents.CreatedAtLayout formats it, and returns its wall clock (in
// UTC) and offset in seconds: a time that Format gives back as s.
func canonicalCreatedAt(s string) (wall time.Time, offset int, ok bool) {
	// 2006-01-02T15:04:05.000000-07:00
	// 0123456789012345678901234567890 1
	if len(s) != len(runevents.CreatedAtLayout) || s[4] != '-' || s[7] != '-' || s[10] != 'T' ||
		s[13] != ':' || s[16] != ':' || s[19] != '.' || (s[26] != '+' && s[26] != '-') || s[29] != ':' {
		return time.Time{}, 0, false
	}
	var n [7]int // year, month, day, hour, minute, second, microsecond
	for i, f := range [][2]int{{0, 4}, {5, 7}, {8, 10}, {11, 13}, {14, 16}, {17, 19}, {20, 26}} {
		v, ok := digits(s[f[0]:f[1]])
		if !ok {
			return time.Time{}, 0, false
		}
		n[i] = v
	}
	oh, ok1 := digits(s[27:29])
	om, ok2 := digits(s[30:32])
	if !ok1 || !ok2 || n[1] < 1 || n[1] > 12 || n[2] < 1 || n[2] > 31 || n[3] > 23 || n[4] > 59 || n[5] > 59 || oh > 23 || om > 59 {
		return time.Time{}, 0, false
	}
	offset = (oh*60 + om) * 60
	if s[26] == '-' {
		if offset == 0 {
			return time.Time{}, 0, false // Format writes +00:00
		}
		offset = -offset
	}
	wall = time.Date(n[0], time.Month(n[1]), n[2], n[3], n[4], n[5], n[6]*1000, time.UTC)
	if wall.Day() != n[2] { // a day that does not exist, such as February 30
		return time.Time{}, 0, false
	}
	return wall, offset, true
}

// digits parses a run of ASCII digits.
func digits(s string) (int, bool) {
	v := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		v = v*10 + int(s[i]-'0')
	}
	return v, true
}

func parseCreatedAtSlow(s string) (time.Time, error) {
	t, err := time.Parse(runevents.CreatedAtLayout, s)
	if err != nil {
		return time.Time{}, err
	}
	_, offset := t.Zone()
	return inOffsetZone(t, offset), nil
}

// inOffsetZone returns t in UTC for offset 0, else in an unnamed fixed
// zone of offset seconds, never in the process's Local zone.
func inOffsetZone(t time.Time, offset int) time.Time {
	if offset == 0 {
		return t.UTC()
	}
	return t.In(fixedZone(offset))
}

// zones caches the fixed zones of the offsets read, so that rows do not
// allocate one each.
var zones sync.Map // offset seconds → *time.Location

func fixedZone(offset int) *time.Location {
	if loc, ok := zones.Load(offset); ok {
		return loc.(*time.Location)
	}
	loc, _ := zones.LoadOrStore(offset, time.FixedZone("", offset))
	return loc.(*time.Location)
}
