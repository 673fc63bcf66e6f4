// One table per match kind (exact, lpm, ternary, range, optional), a table with const
// entries and a const default action, hit/miss and action_run branches. Each result lands
// in the 'res_t' header.
#include <core.p4>
#include <v1model.p4>

header key_t { bit<16> e; bit<32> addr; bit<8> t; bit<16> r; bit<8> o1; bit<8> o2; }
header res_t {
    bit<8> exact_v; bit<8> lpm_v; bit<8> tern_v; bit<8> range_v; bit<8> opt_v;
    bit<8> const_v; bit<8> hit_bits; bit<8> path;
}
struct headers_t { res_t r; key_t k; }
struct meta_t { }

parser P(packet_in pkt, out headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start { pkt.extract(h.k); transition accept; }
}
control VC(inout headers_t h, inout meta_t m) { apply { } }
control I(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    action set_exact(bit<8> v) { h.r.exact_v = v; }
    action set_lpm(bit<8> v) { h.r.lpm_v = v; }
    action set_tern(bit<8> v) { h.r.tern_v = v; }
    action set_range(bit<8> v) { h.r.range_v = v; }
    action set_opt(bit<8> v) { h.r.opt_v = v; }
    action set_const(bit<8> v) { h.r.const_v = v; }
    action miss_mark() { h.r.exact_v = 0xEE; }
    action path_a() { }
    action path_b(bit<8> unused) { }
    action drop() { mark_to_drop(sm); }

    table t_exact {
        key = { h.k.e: exact; }
        actions = { set_exact; miss_mark; drop; }
        default_action = miss_mark();
        size = 64;
    }
    table t_lpm {
        key = { h.k.addr: lpm; }
        actions = { set_lpm; NoAction; }
        default_action = NoAction();
    }
    table t_tern {
        key = { h.k.t: ternary; h.k.e: exact; }
        actions = { set_tern; NoAction; }
        default_action = set_tern(0xDD);
    }
    table t_range {
        key = { h.k.r: range; }
        actions = { set_range; NoAction; }
        default_action = NoAction();
    }
    table t_opt {
        key = { h.k.o1: optional; h.k.o2: optional; }
        actions = { set_opt; NoAction; }
        default_action = NoAction();
    }
    table t_const {
        key = { h.k.t: ternary; }
        actions = { set_const; }
        const default_action = set_const(0xCC);
        const entries = {
            0x10 &&& 0xF0 : set_const(1);
            0x12 &&& 0xFF : set_const(2);   // listed later: lower priority than the first
            0x20 &&& 0xF0 : set_const(3);
        }
    }
    table t_switch {
        key = { h.k.o1: exact; }
        actions = { path_a; path_b; }
        default_action = path_b(0);
    }
    apply {
        h.r.setValid();
        sm.egress_spec = 4;
        if (t_exact.apply().hit) { h.r.hit_bits = h.r.hit_bits | 1; }
        if (t_lpm.apply().hit) { h.r.hit_bits = h.r.hit_bits | 2; }
        if (!t_tern.apply().hit) { h.r.hit_bits = h.r.hit_bits | 4; }
        t_range.apply();
        t_opt.apply();
        t_const.apply();
        switch (t_switch.apply().action_run) {
            path_a: { h.r.path = 0xA; }
            path_b: { h.r.path = 0xB; }
        }
    }
}
control E(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t h, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers_t h) { apply { pkt.emit(h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
