package fielderr

import (
	"strconv"
	"strings"
)

// Field returns the path of the named field of the value at path: name
// alone at the top of the document, else path + "." + name.
func Field(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// Index returns the path of the i'th element of the list at path, as
// path + "[i]".
func Index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// Key returns the path of the entry k of the map at path: as Field when k
// is not empty and holds only ASCII letters, digits, '_' and '-'; else k
// quoted in brackets, as path + `["k"]` with k quoted by strconv.Quote.
func Key(path, k string) string {
	if k != "" && strings.IndexFunc(k, func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-')
	}) < 0 {
		return Field(path, k)
	}
	return path + "[" + strconv.Quote(k) + "]"
}
