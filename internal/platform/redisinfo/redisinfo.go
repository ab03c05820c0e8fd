// Package redisinfo reads Redis's INFO answers: lines of "name:value"
// under "# Section" headers.
package redisinfo

import "strings"

// Fields returns the name:value lines of info, an INFO answer, by name; a
// name given twice keeps its last value. Section headers, blank lines and
// lines without a colon are left out; a value keeps any colons of its own
// ("master_host:::1" is "::1").
func Fields(info string) map[string]string {
	fields := map[string]string{}
	for line := range strings.Lines(info) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "#") {
			continue
		}
		if name, value, ok := strings.Cut(line, ":"); ok && name != "" {
			fields[name] = value
		}
	}
	return fields
}
