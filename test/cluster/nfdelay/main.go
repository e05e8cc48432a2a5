//go:build linux

// Command nfdelay delays and drops the packets that iptables' NFQUEUE target hands it: it binds
// one netfilter queue over netlink, in the network namespace it runs in, and gives each packet
// its verdict a set time after it was queued (accept, in the order they came), or at once a
// drop, for a given fraction of them. It is the test clusters' stand-in for netem on a kernel
// without it (package cluster, Cluster.Delay). It prints "ready" once the queue is bound and
// exits when its standard input closes, after releasing what it still holds.
//
//	nfdelay -queue N -delay 150ms -loss 0.05
package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// The netlink messages and attributes of nfnetlink_queue (linux/netfilter/nfnetlink_queue.h).
const (
	subsysQueue = 3 // NFNL_SUBSYS_QUEUE

	msgPacket  = 0 // NFQNL_MSG_PACKET
	msgVerdict = 1 // NFQNL_MSG_VERDICT
	msgConfig  = 2 // NFQNL_MSG_CONFIG

	attrCfgCmd    = 1      // NFQA_CFG_CMD
	attrCfgParams = 2      // NFQA_CFG_PARAMS
	attrCfgMaxLen = 3      // NFQA_CFG_QUEUE_MAXLEN
	attrPacketHdr = 1      // NFQA_PACKET_HDR
	attrVerdict   = 2      // NFQA_VERDICT_HDR
	attrTypeMask  = 0x3fff // NLA_TYPE_MASK: an attribute's type without its flags

	cmdBind  = 1 // NFQNL_CFG_CMD_BIND
	copyMeta = 1 // NFQNL_COPY_META: the packet's header attributes, not its payload

	verdictDrop   = 0 // NF_DROP
	verdictAccept = 1 // NF_ACCEPT
)

// maxQueued is the most packets the kernel holds for the queue; past it, it drops them.
const maxQueued = 8192

func main() {
	queue := flag.Uint("queue", 0, "the netfilter queue number to bind")
	delay := flag.Duration("delay", 0, "how long each accepted packet is held")
	loss := flag.Float64("loss", 0, "the fraction of packets dropped (0 to 1)")
	flag.Parse()
	if *queue > 65535 || *delay < 0 || *loss < 0 || *loss > 1 || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: nfdelay -queue N -delay D -loss P (N up to 65535, P from 0 to 1)")
		os.Exit(2)
	}
	if err := run(uint16(*queue), *delay, *loss); err != nil {
		fmt.Fprintf(os.Stderr, "nfdelay: queue %d: %v\n", *queue, err)
		os.Exit(1)
	}
}

// held is an accepted packet waiting for its time.
type held struct {
	id  uint32
	due time.Time
}

func run(queue uint16, delay time.Duration, loss float64) error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
	if err != nil {
		return fmt.Errorf("netlink socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("bind netlink socket: %w", err)
	}
	// Room for bursts: what does not fit is lost, which the caller asked for anyway.
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20)
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_NO_ENOBUFS, 1)
	for i, msg := range configMessages(queue) {
		if err := request(fd, msg, uint32(i+1)); err != nil {
			return fmt.Errorf("configure: %w", err)
		}
	}
	fmt.Println("ready")

	// Each accepted packet goes into one FIFO and comes out at its due time: the delay is the
	// same for all, so they leave in the order they came.
	fifo := make(chan held, maxQueued)
	errc := make(chan error, 2)
	go func() {
		for h := range fifo {
			time.Sleep(time.Until(h.due))
			if err := send(fd, verdictMessage(queue, h.id, verdictAccept)); err != nil {
				errc <- fmt.Errorf("accept packet %d: %w", h.id, err)
				return
			}
		}
	}()
	go func() {
		buf := make([]byte, 1<<16)
		for {
			n, _, err := unix.Recvfrom(fd, buf, 0)
			if errors.Is(err, unix.EINTR) || errors.Is(err, unix.ENOBUFS) {
				continue
			}
			if err != nil {
				errc <- fmt.Errorf("receive: %w", err)
				return
			}
			now := time.Now()
			ids, err := packetIDs(buf[:n])
			if err != nil {
				errc <- err
				return
			}
			for _, id := range ids {
				if loss > 0 && rand.Float64() < loss {
					if err := send(fd, verdictMessage(queue, id, verdictDrop)); err != nil {
						errc <- fmt.Errorf("drop packet %d: %w", id, err)
						return
					}
					continue
				}
				fifo <- held{id: id, due: now.Add(delay)}
			}
		}
	}()
	go func() {
		io.Copy(io.Discard, os.Stdin)
		errc <- nil
	}()
	if err := <-errc; err != nil {
		return err
	}
	// Standard input closed: the caller has removed the rules. Release what was queued before,
	// then go (closing the socket would drop whatever is left).
	time.Sleep(delay + 250*time.Millisecond)
	return nil
}

// request sends msg with an acknowledgement asked for and returns the kernel's answer.
func request(fd int, msg []byte, seq uint32) error {
	binary.NativeEndian.PutUint16(msg[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	binary.NativeEndian.PutUint32(msg[8:], seq)
	if err := send(fd, msg); err != nil {
		return err
	}
	buf := make([]byte, 4096)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		for b := buf[:n]; len(b) >= unix.NLMSG_HDRLEN; {
			l := int(binary.NativeEndian.Uint32(b))
			if l < unix.NLMSG_HDRLEN || l > len(b) {
				return fmt.Errorf("a netlink message of %d bytes in %d", l, len(b))
			}
			typ := binary.NativeEndian.Uint16(b[4:])
			if typ == unix.NLMSG_ERROR && binary.NativeEndian.Uint32(b[8:]) == seq && l >= unix.NLMSG_HDRLEN+4 {
				if errno := int32(binary.NativeEndian.Uint32(b[unix.NLMSG_HDRLEN:])); errno != 0 {
					return unix.Errno(-errno)
				}
				return nil
			}
			b = b[align(l):]
		}
	}
}

func send(fd int, msg []byte) error {
	for {
		err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// configMessages are the requests that bind queue to this socket, ask for the packets' header
// attributes only, and let the kernel hold maxQueued of them.
func configMessages(queue uint16) [][]byte {
	params := make([]byte, 5) // struct nfqnl_msg_config_params: __be32 copy_range, __u8 copy_mode
	params[4] = copyMeta
	return [][]byte{
		message(msgConfig, queue, attr(attrCfgCmd, []byte{cmdBind, 0, 0, unix.AF_INET})),
		message(msgConfig, queue, attr(attrCfgParams, params)),
		message(msgConfig, queue, attr(attrCfgMaxLen, binary.BigEndian.AppendUint32(nil, maxQueued))),
	}
}

// verdictMessage gives packet id of queue its verdict.
func verdictMessage(queue uint16, id uint32, verdict uint32) []byte {
	hdr := binary.BigEndian.AppendUint32(nil, verdict) // struct nfqnl_msg_verdict_hdr
	hdr = binary.BigEndian.AppendUint32(hdr, id)
	msg := message(msgVerdict, queue, attr(attrVerdict, hdr))
	binary.NativeEndian.PutUint16(msg[6:], unix.NLM_F_REQUEST)
	return msg
}

// message builds a netlink message of nfnetlink_queue's type typ for queue with the given
// attributes: struct nlmsghdr, struct nfgenmsg, then the attributes.
func message(typ uint16, queue uint16, attrs ...[]byte) []byte {
	b := make([]byte, unix.NLMSG_HDRLEN, 64)
	binary.NativeEndian.PutUint16(b[4:], subsysQueue<<8|typ)
	b = append(b, unix.AF_UNSPEC, 0) // nfgen_family, version NFNETLINK_V0
	b = binary.BigEndian.AppendUint16(b, queue)
	for _, a := range attrs {
		b = append(b, a...)
	}
	binary.NativeEndian.PutUint32(b, uint32(len(b)))
	return b
}

// attr builds a netlink attribute, padded to 4 bytes.
func attr(typ uint16, data []byte) []byte {
	b := binary.NativeEndian.AppendUint16(nil, uint16(unix.SizeofNlAttr+len(data)))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, data...)
	return append(b, make([]byte, align(len(b))-len(b))...)
}

// packetIDs returns the ids of the packets queued in buf's netlink messages, in order; other
// messages are skipped.
func packetIDs(buf []byte) ([]uint32, error) {
	var ids []uint32
	for len(buf) >= unix.NLMSG_HDRLEN {
		l := int(binary.NativeEndian.Uint32(buf))
		if l < unix.NLMSG_HDRLEN || l > len(buf) {
			return ids, fmt.Errorf("a netlink message of %d bytes in %d", l, len(buf))
		}
		msg := buf[:l]
		buf = buf[min(align(l), len(buf)):]
		if binary.NativeEndian.Uint16(msg[4:]) != subsysQueue<<8|msgPacket || l < unix.NLMSG_HDRLEN+4 {
			continue
		}
		found := false
		for a := msg[unix.NLMSG_HDRLEN+4:]; len(a) >= unix.SizeofNlAttr; {
			al := int(binary.NativeEndian.Uint16(a))
			if al < unix.SizeofNlAttr || al > len(a) {
				return ids, fmt.Errorf("an attribute of %d bytes in %d", al, len(a))
			}
			if binary.NativeEndian.Uint16(a[2:])&attrTypeMask == attrPacketHdr && al >= unix.SizeofNlAttr+4 {
				ids = append(ids, binary.BigEndian.Uint32(a[unix.SizeofNlAttr:]))
				found = true
				break
			}
			a = a[min(align(al), len(a)):]
		}
		if !found {
			return ids, errors.New("a queued packet without its header attribute")
		}
	}
	return ids, nil
}

// align rounds n up to netlink's 4-byte alignment.
func align(n int) int { return (n + 3) &^ 3 }
