package conn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// ask asks every sentinel which master it names, each within the set-up
// time, and returns the address named with the highest configuration
// epoch: the sentinels adopt a newer epoch's master over an older one, so
// a sentinel that has not heard of a failover yet (or sits in a minority
// partition) is outvoted by one that has. answered tells which sentinels
// answered. It fails when none names a master.
func (s *Sentinel) ask(ctx context.Context) (addr string, answered []bool, err error) {
	answered = make([]bool, len(s.sentinels))
	best := int64(-2)
	var why []string
	for i, c := range s.sentinels {
		a, epoch, err := s.askOne(ctx, c)
		if err != nil {
			why = append(why, redactAddr(s.opts.SentinelAddrs[i])+": "+err.Error())
			continue
		}
		answered[i] = true
		if epoch > best {
			addr, best = a, epoch
		}
	}
	if addr == "" {
		return "", answered, fmt.Errorf("redlock: no sentinel names the master of %q: %s", s.opts.MasterName, strings.Join(why, "; "))
	}
	return addr, answered, nil
}

// askOne asks one sentinel for the master it names
// (SENTINEL GET-MASTER-ADDR-BY-NAME) and its configuration epoch
// (SENTINEL MASTER's config-epoch; -1 when refused, by an ACL say), in
// one round trip.
func (s *Sentinel) askOne(ctx context.Context, c *redis.Client) (string, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.setup)
	defer cancel()
	name := s.opts.MasterName
	named := redis.NewStringSliceCmd(ctx, "sentinel", "get-master-addr-by-name", name)
	info := redis.NewMapStringStringCmd(ctx, "sentinel", "master", name)
	pl := c.Pipeline()
	_ = pl.Process(ctx, named)
	_ = pl.Process(ctx, info)
	_, execErr := pl.Exec(ctx)
	err := named.Err()
	switch {
	case errors.Is(err, redis.Nil):
		return "", 0, fmt.Errorf("it watches no master named %q", name)
	case err == nil && len(named.Val()) == 0 && execErr != nil:
		// go-redis leaves an error of the connection's setup (a wrong
		// password, say) off the commands of a pipeline.
		return "", 0, execErr
	case err != nil:
		return "", 0, err
	case len(named.Val()) != 2:
		return "", 0, fmt.Errorf("it names %q, not a host and a port", named.Val())
	}
	epoch := int64(-1)
	if info.Err() == nil {
		if e, err := strconv.ParseInt(info.Val()["config-epoch"], 10, 64); err == nil {
			epoch = e
		}
	}
	return net.JoinHostPort(named.Val()[0], named.Val()[1]), epoch, nil
}

// switchFeed is the watcher's subscription to one sentinel's announcements
// of new masters (switchChannel). It is a shortcut only: the watcher asks
// every sentinel every watchEvery whatever the feed says.
type switchFeed struct {
	ps   *redis.PubSub
	on   int
	msgs <-chan *redis.Message
}

// follow keeps the feed on a sentinel that answered the last asking: it
// moves to the first that did when its own did not (go-redis would only
// ever reconnect to the same one).
func (f *switchFeed) follow(sentinels []*redis.Client, answered []bool) {
	if f.ps != nil && answered[f.on] {
		return
	}
	f.close()
	for i, ok := range answered {
		if ok {
			// The SUBSCRIBE's own error is the connection's: the next
			// asking finds that sentinel silent and moves the feed.
			f.ps = sentinels[i].Subscribe(context.Background(), switchChannel)
			f.on, f.msgs = i, f.ps.Channel()
			return
		}
	}
}

// close ends the feed's subscription, if any.
func (f *switchFeed) close() {
	if f.ps != nil {
		_ = f.ps.Close() // ours alone; nothing to report
		f.ps, f.msgs = nil, nil
	}
}

// SentinelOptions are the options of a client of the sentinel at addr:
// the group's sentinel credentials, TLS, dialer and timeouts, as go-redis's
// failover client has them.
func SentinelOptions(o *redis.FailoverOptions, addr string) *redis.Options {
	return &redis.Options{
		Network: "tcp", Addr: addr, ClientName: o.ClientName, Dialer: o.Dialer, OnConnect: o.OnConnect,
		Protocol: o.Protocol, Username: o.SentinelUsername, Password: o.SentinelPassword,
		DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout,
		TLSConfig: o.TLSConfig, DisableIdentity: o.DisableIdentity, IdentitySuffix: o.IdentitySuffix,
	}
}

// SentinelMasterOptions are the options of a client of the group's data
// server at addr: the group's credentials, database, TLS, dialer and
// timeouts.
func SentinelMasterOptions(o *redis.FailoverOptions, addr string) *redis.Options {
	return &redis.Options{
		Network: "tcp", Addr: addr, ClientName: o.ClientName, Dialer: o.Dialer, OnConnect: o.OnConnect,
		Protocol: o.Protocol, Username: o.Username, Password: o.Password, DB: o.DB,
		CredentialsProvider: o.CredentialsProvider, CredentialsProviderContext: o.CredentialsProviderContext,
		StreamingCredentialsProvider: o.StreamingCredentialsProvider,
		DialTimeout:                  o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout,
		TLSConfig: o.TLSConfig, DisableIdentity: o.DisableIdentity, IdentitySuffix: o.IdentitySuffix,
	}
}
