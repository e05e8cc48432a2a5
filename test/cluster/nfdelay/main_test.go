//go:build linux

package main

import (
	"bytes"
	"encoding/binary"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMessages checks the bytes of a verdict and of the bind request against struct nlmsghdr,
// struct nfgenmsg and the attributes' layout.
func TestMessages(t *testing.T) {
	v := verdictMessage(7, 0x01020304, verdictAccept)
	want := []byte{
		0, 0, 0, 0, // length, checked below
		0, 0, // type, checked below
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // flags, seq, pid
		unix.AF_UNSPEC, 0, 0, 7, // nfgenmsg: family, version, queue (big-endian)
		12, 0, 2, 0, // attribute NFQA_VERDICT_HDR of 12 bytes (native endian, here little)
		0, 0, 0, 1, 1, 2, 3, 4, // verdict NF_ACCEPT, packet id (big-endian)
	}
	binary.NativeEndian.PutUint32(want, uint32(len(want)))
	binary.NativeEndian.PutUint16(want[4:], 3<<8|1)
	binary.NativeEndian.PutUint16(want[6:], unix.NLM_F_REQUEST)
	if !bytes.Equal(v, want) {
		t.Errorf("verdict\n% x, want\n% x", v, want)
	}
	cfg := configMessages(9)
	if len(cfg) != 3 {
		t.Fatalf("%d config messages, want bind, copy mode and queue length", len(cfg))
	}
	if got := cfg[1][unix.NLMSG_HDRLEN+4:]; !bytes.Equal(got, []byte{9, 0, 2, 0, 0, 0, 0, 0, copyMeta, 0, 0, 0}) {
		t.Errorf("copy mode attribute % x: want 9 bytes of length, padded to 12", got)
	}
	for _, m := range cfg {
		if l := int(binary.NativeEndian.Uint32(m)); l != len(m) || l%4 != 0 {
			t.Errorf("config message of %d bytes says %d", len(m), l)
		}
	}
}

// TestPacketIDs reads the ids of queued packets from a buffer of several messages, skipping
// messages of other kinds and attributes before the packet header.
func TestPacketIDs(t *testing.T) {
	packet := func(id uint32) []byte {
		hdr := binary.BigEndian.AppendUint32(nil, id)
		hdr = append(hdr, 0x08, 0x00, 3) // hw_protocol, hook
		return message(msgPacket, 1, attr(9, []byte{1, 2, 3, 4, 5}), attr(attrPacketHdr, hdr))
	}
	var buf []byte
	buf = append(buf, packet(5)...)
	buf = append(buf, message(msgVerdict, 1)...)
	buf = append(buf, packet(6)...)
	ids, err := packetIDs(buf)
	if err != nil || !slices.Equal(ids, []uint32{5, 6}) {
		t.Errorf("ids %v, %v; want [5 6]", ids, err)
	}
	if _, err := packetIDs(message(msgPacket, 1, attr(9, nil))); err == nil {
		t.Error("a packet without its header: no error")
	}
	short := packet(5)
	binary.NativeEndian.PutUint32(short, uint32(len(short)+4))
	if _, err := packetIDs(short); err == nil {
		t.Error("a message longer than the buffer: no error")
	}
}
