/* Test program for the softswitch P4Runtime server (tests/softswitch_server).
 *
 * Small on purpose, but it has one table per match kind, a default-only action, an
 * indirect counter, a register, a multicast action and packet_in / packet_out controller
 * headers, so that every P4Runtime entity the server translates is exercised against a
 * real p4c P4Info + bmv2 JSON pair.  Rebuild with tests/softswitch_server/p4/build.sh.
 */
#include <core.p4>
#include <v1model.p4>

const bit<9> CPU_PORT = 255;

@controller_header("packet_in")
header packet_in_t {
    bit<9>  ingress_port;
    bit<7>  _pad;
    bit<16> tag;
}

@controller_header("packet_out")
header packet_out_t {
    bit<9> egress_port;
    bit<3> flags;
    bit<4> _pad;
}

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> ether_type;
}

/* ether_type 0x88b5 (local experimental): a header with fields for lpm / range matches */
header probe_t {
    bit<32> addr;
    bit<16> level;
    bit<16> value;
}

struct headers_t {
    packet_out_t packet_out;
    packet_in_t  packet_in;
    ethernet_t   ethernet;
    probe_t      probe;
}

struct metadata_t {
    bit<16> tag;
}

parser TestParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t std) {
    state start {
        transition select(std.ingress_port) {
            CPU_PORT: parse_packet_out;
            default: parse_ethernet;
        }
    }
    state parse_packet_out {
        pkt.extract(hdr.packet_out);
        transition parse_ethernet;
    }
    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            0x88b5: parse_probe;
            default: accept;
        }
    }
    state parse_probe {
        pkt.extract(hdr.probe);
        transition accept;
    }
}

control TestVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control TestIngress(inout headers_t hdr, inout metadata_t meta,
                    inout standard_metadata_t std) {
    counter(64, CounterType.packets_and_bytes) port_counter;
    register<bit<16>>(16) last_ether_type;

    action drop() {
        mark_to_drop(std);
    }
    action forward(bit<9> port) {
        std.egress_spec = port;
    }
    action to_cpu(bit<16> tag) {
        std.egress_spec = CPU_PORT;
        hdr.packet_in.setValid();
        hdr.packet_in.ingress_port = std.ingress_port;
        hdr.packet_in._pad = 0;
        hdr.packet_in.tag = tag;
    }
    action flood(bit<16> group) {
        std.mcast_grp = group;
    }
    action set_tag(bit<16> tag) {
        meta.tag = tag;
    }
    @defaultonly action miss_tag() {
        meta.tag = 0xffff;
    }

    table l2_exact {
        key = { hdr.ethernet.dst: exact; }
        actions = { forward; to_cpu; flood; drop; }
        default_action = drop();
        size = 64;
    }
    table acl_ternary {
        key = {
            hdr.ethernet.ether_type: ternary;
            std.ingress_port: optional;
        }
        actions = { set_tag; NoAction; }
        default_action = NoAction();
        size = 64;
    }
    table route_lpm {
        key = { hdr.probe.addr: lpm; }
        actions = { forward; drop; }
        default_action = drop();
        size = 64;
    }
    table level_range {
        key = { hdr.probe.level: range; }
        actions = { set_tag; @defaultonly miss_tag; }
        default_action = miss_tag();
        size = 64;
    }
    table const_default {
        key = { hdr.ethernet.src: exact; }
        actions = { set_tag; NoAction; }
        const default_action = NoAction();
        size = 16;
    }

    apply {
        if (hdr.packet_out.isValid()) {
            std.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
            exit;
        }
        port_counter.count((bit<32>) std.ingress_port);
        last_ether_type.write((bit<32>) std.ingress_port[3:0], hdr.ethernet.ether_type);
        acl_ternary.apply();
        const_default.apply();
        if (hdr.probe.isValid()) {
            level_range.apply();
            route_lpm.apply();
        } else {
            l2_exact.apply();
        }
        if (hdr.packet_in.isValid() && meta.tag != 0 && hdr.packet_in.tag == 0) {
            hdr.packet_in.tag = meta.tag;
        }
    }
}

control TestEgress(inout headers_t hdr, inout metadata_t meta,
                   inout standard_metadata_t std) {
    apply { }
}

control TestComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control TestDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.packet_in);
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.probe);
    }
}

V1Switch(TestParser(), TestVerifyChecksum(), TestIngress(), TestEgress(),
         TestComputeChecksum(), TestDeparser()) main;
