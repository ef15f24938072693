package main

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// doc is one document of a tenant.
type doc struct {
	ID    string `json:"id"`
	Title string `json:"title"`
}

// seedDocs and seedBodies are the demo's documents: each tenant sees only
// its own.
var (
	seedDocs = map[string][]doc{
		"acme":   {{"a1", "Q3 roadmap"}, {"a2", "Incident 42 postmortem"}, {"a3", "Onboarding guide"}},
		"globex": {{"g1", "Price list"}, {"g2", "Supplier contracts"}},
	}
	seedBodies = map[string]string{
		"acme/a1":   "Q3 roadmap: ship the billing revamp, retire the v1 API, open the Berlin office.",
		"acme/a2":   "Incident 42 postmortem: a config push disabled TLS renewal; certificates expired for 47 minutes.",
		"acme/a3":   "Onboarding guide: get a laptop, read the handbook, pair with your buddy in week one.",
		"globex/g1": "Price list: widgets 4 EUR, gizmos 11 EUR, volume discounts above 1000 units.",
		"globex/g2": "Supplier contracts: three suppliers, renewals due in March, penalties for late delivery.",
	}
)

// docStore keeps the tenants' documents and the invoice counter: in
// memory, or in Redis so that several quickstart processes share them.
type docStore interface {
	list(ctx context.Context, tenant string) ([]doc, error)
	body(ctx context.Context, tenant, id string) (string, bool, error)
	remove(ctx context.Context, tenant, id string) (bool, error)
	nextInvoice(ctx context.Context) (int64, error)
}

type memDocs struct {
	mu       sync.Mutex // guards docs
	docs     map[string][]doc
	invoices atomic.Int64
}

func newMemDocs() *memDocs {
	d := &memDocs{docs: map[string][]doc{}}
	for t, ds := range seedDocs {
		d.docs[t] = slices.Clone(ds)
	}
	return d
}

func (d *memDocs) list(_ context.Context, tenant string) ([]doc, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.docs[tenant]), nil
}

func (d *memDocs) body(_ context.Context, tenant, id string) (string, bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !slices.ContainsFunc(d.docs[tenant], func(dc doc) bool { return dc.ID == id }) {
		return "", false, nil
	}
	return seedBodies[tenant+"/"+id], true, nil
}

func (d *memDocs) remove(_ context.Context, tenant, id string) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	i := slices.IndexFunc(d.docs[tenant], func(dc doc) bool { return dc.ID == id })
	if i < 0 {
		return false, nil
	}
	d.docs[tenant] = slices.Delete(slices.Clone(d.docs[tenant]), i, i+1)
	return true, nil
}

func (d *memDocs) nextInvoice(context.Context) (int64, error) { return d.invoices.Add(1), nil }

// redisDocs keeps the documents in Redis hashes under prefix: titles and
// bodies per tenant, seeded once. A tenant's keys share the hash tag
// {tenant}, so that on a Redis Cluster they are in one slot and one
// transaction or script can change them together.
type redisDocs struct {
	c      redis.UniversalClient
	prefix string
}

// tenantKey returns the key of one of tenant's hashes ("titles",
// "bodies") or of its seeded marker ("seeded").
func (d *redisDocs) tenantKey(tenant, kind string) string {
	return d.prefix + "{" + tenant + "}:" + kind
}

// seedScript writes a tenant's documents (ARGV: id, title, body, ...) into
// its titles and bodies hashes, then its seeded marker, unless the marker
// is there: a tenant is seeded once, atomically, and documents deleted
// later are not brought back by the next process to start.
var seedScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
for i = 1, #ARGV, 3 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i+1])
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i+2])
end
redis.call('SET', KEYS[3], '1')
return 1
`)

func newRedisDocs(ctx context.Context, c redis.UniversalClient, prefix string) (*redisDocs, error) {
	d := &redisDocs{c: c, prefix: prefix}
	for t, ds := range seedDocs {
		var args []any
		for _, dc := range ds {
			args = append(args, dc.ID, dc.Title, seedBodies[t+"/"+dc.ID])
		}
		keys := []string{d.tenantKey(t, "titles"), d.tenantKey(t, "bodies"), d.tenantKey(t, "seeded")}
		if err := seedScript.Run(ctx, c, keys, args...).Err(); err != nil {
			return d, err
		}
	}
	return d, nil
}

func (d *redisDocs) list(ctx context.Context, tenant string) ([]doc, error) {
	m, err := d.c.HGetAll(ctx, d.tenantKey(tenant, "titles")).Result()
	if err != nil {
		return nil, err
	}
	out := make([]doc, 0, len(m))
	for id, title := range m {
		out = append(out, doc{id, title})
	}
	slices.SortFunc(out, func(a, b doc) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

func (d *redisDocs) body(ctx context.Context, tenant, id string) (string, bool, error) {
	s, err := d.c.HGet(ctx, d.tenantKey(tenant, "bodies"), id).Result()
	if errors.Is(err, redis.Nil) {
		return "", false, nil
	}
	return s, err == nil, err
}

func (d *redisDocs) remove(ctx context.Context, tenant, id string) (bool, error) {
	pipe := d.c.TxPipeline() // one slot: the tenant's
	n := pipe.HDel(ctx, d.tenantKey(tenant, "titles"), id)
	pipe.HDel(ctx, d.tenantKey(tenant, "bodies"), id)
	if _, err := pipe.Exec(ctx); err != nil {
		return false, err
	}
	return n.Val() == 1, nil
}

func (d *redisDocs) nextInvoice(ctx context.Context) (int64, error) {
	return d.c.Incr(ctx, d.prefix+"invoices").Result()
}
