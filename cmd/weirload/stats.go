package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weirhq/weir/internal/platform/redisinfo"
)

// counts are what weirload reads from Redis and the limiter before and
// after the measured time: Redis's commands, and the limiter's rule
// decisions from failure modes and in all.
type counts struct{ commands, failed, all int64 }

// readCounts reads counts from --store-addr and --metrics (0 for either
// not given).
func readCounts(ctx context.Context, c config) (counts, error) {
	var n counts
	var err error
	if n.commands, err = storeCommands(ctx, c.storeAddr); err != nil {
		return counts{}, err
	}
	if n.failed, n.all, err = failureDecisions(ctx, c.metricsURL); err != nil {
		return counts{}, err
	}
	return n, nil
}

// storeCommands returns how many commands the Redis at addr has run, from
// INFO commandstats (the commands scripts call included), INFO itself not
// counted; 0 when addr is "".
func storeCommands(ctx context.Context, addr string) (int64, error) {
	if addr == "" {
		return 0, nil
	}
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, fmt.Errorf("read INFO commandstats from %s: %w", addr, err)
	}
	return sumCommands(info), nil
}

// sumCommands sums the calls of an INFO commandstats reply
// ("cmdstat_evalsha:calls=12,usec=..."), leaving out INFO's own.
func sumCommands(info string) int64 {
	var n int64
	for name, stats := range redisinfo.Fields(info) {
		if !strings.HasPrefix(name, "cmdstat_") || name == "cmdstat_info" {
			continue
		}
		for kv := range strings.SplitSeq(stats, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				calls, _ := strconv.ParseInt(v, 10, 64)
				n += calls
			}
		}
	}
	return n
}

// failureDecisions returns the limiter's rule decisions from failure
// modes and all of them, from weir_decisions_total at url (its /metrics);
// 0, 0 when url is "".
func failureDecisions(ctx context.Context, url string) (failed, all int64, err error) {
	if url == "" {
		return 0, 0, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, 0, fmt.Errorf("read metrics: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, fmt.Errorf("read metrics from %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("read metrics from %s: %s", url, resp.Status)
	}
	failed, all = countDecisions(resp.Body)
	return failed, all, nil
}

// countDecisions sums the weir_decisions_total samples of a Prometheus
// text exposition: those of a failure_* source, and all.
func countDecisions(r io.Reader) (failed, all int64) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "weir_decisions_total{") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		all += int64(v)
		if strings.Contains(line[:i], `source="failure_`) {
			failed += int64(v)
		}
	}
	return failed, all
}
