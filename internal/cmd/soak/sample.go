package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// figures are what the soak watches grow: Redis's key count and memory,
// and each replica's resident memory, goroutines and open files.
type figures struct {
	Keys, Memory int64    // DBSIZE, INFO memory's used_memory (bytes)
	RSS          [2]int64 // VmRSS of /proc/PID/status (bytes), replicas A and B
	Goroutines   [2]int64 // runtime.NumGoroutine, from the replica's /debug/soak
	FDs          [2]int64 // entries of /proc/PID/fd
}

// sampler reads the figures.
type sampler struct {
	redis redis.UniversalClient
	debug [2]string // host:port of each replica's debug endpoint
	hc    *http.Client
}

// sample reads every figure once.
func (s *sampler) sample(ctx context.Context) (figures, error) {
	var f figures
	var err error
	if f.Keys, err = s.redis.DBSize(ctx).Result(); err != nil {
		return f, fmt.Errorf("DBSIZE: %w", err)
	}
	info, err := s.redis.Info(ctx, "memory").Result()
	if err != nil {
		return f, fmt.Errorf("INFO memory: %w", err)
	}
	if f.Memory, err = infoField(info, "used_memory"); err != nil {
		return f, err
	}
	for i, addr := range s.debug {
		pid, gor, err := s.debugSoak(ctx, addr)
		if err != nil {
			return f, fmt.Errorf("replica %s: %w", replicaName[i], err)
		}
		f.Goroutines[i] = gor
		if f.RSS[i], err = vmRSS(pid); err != nil {
			return f, fmt.Errorf("replica %s: %w", replicaName[i], err)
		}
		if f.FDs[i], err = openFDs(pid); err != nil {
			return f, fmt.Errorf("replica %s: %w", replicaName[i], err)
		}
	}
	return f, nil
}

var replicaName = [2]string{"A", "B"}

// debugSoak reads a replica's /debug/soak: its process id and goroutines.
func (s *sampler) debugSoak(ctx context.Context, addr string) (pid int, goroutines int64, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/debug/soak", nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	var v struct {
		PID        int   `json:"pid"`
		Goroutines int64 `json:"goroutines"`
	}
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("/debug/soak: %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || v.PID <= 0 {
		return 0, 0, fmt.Errorf("/debug/soak: %v", err)
	}
	return v.PID, v.Goroutines, nil
}

// infoField returns the integer field name of Redis's INFO text.
func infoField(info, name string) (int64, error) {
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+":"); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("INFO has no %s", name)
}

// vmRSS returns the resident memory of process pid, in bytes.
func vmRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte("VmRSS:")); ok {
			f := strings.Fields(string(v)) // "12345 kB"
			if len(f) != 2 || f[1] != "kB" {
				break
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status has no VmRSS", pid)
}

// openFDs returns how many files process pid has open.
func openFDs(pid int) (int64, error) {
	es, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return int64(len(es)), err
}

// median returns the figures' medians, each figure on its own (the lower
// middle of an even count); the zero figures for none.
func median(fs []figures) figures {
	var m figures
	if len(fs) == 0 {
		return m
	}
	pick := func(get func(figures) int64) int64 {
		vs := make([]int64, len(fs))
		for i, f := range fs {
			vs[i] = get(f)
		}
		slices.Sort(vs)
		return vs[(len(vs)-1)/2]
	}
	m.Keys = pick(func(f figures) int64 { return f.Keys })
	m.Memory = pick(func(f figures) int64 { return f.Memory })
	for i := range 2 {
		m.RSS[i] = pick(func(f figures) int64 { return f.RSS[i] })
		m.Goroutines[i] = pick(func(f figures) int64 { return f.Goroutines[i] })
		m.FDs[i] = pick(func(f figures) int64 { return f.FDs[i] })
	}
	return m
}

// every samples the figures every d until ctx ends, sending each to
// samples; the first error goes to errs.
func (s *sampler) every(ctx context.Context, d time.Duration, samples chan<- figures, errs chan<- error) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		f, err := s.sample(ctx)
		if err != nil {
			if ctx.Err() == nil {
				select {
				case errs <- err:
				default:
				}
			}
			continue
		}
		select {
		case samples <- f:
		case <-ctx.Done():
			return
		}
	}
}
