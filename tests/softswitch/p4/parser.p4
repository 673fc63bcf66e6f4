// Parser: select on masks / multiple fields / default, lookahead, a header stack, verify()
// with a custom error, and what simple_switch does on a parser error (packet continues with
// standard_metadata.parser_error set). The report header carries what ingress saw.
#include <core.p4>
#include <v1model.p4>

error { BadTtl }

header eth_t { bit<48> dst; bit<48> src; bit<16> etype; }
header tag_t { bit<3> pcp; bit<1> dei; bit<12> vid; bit<16> etype; }
header lbl_t { bit<20> label; bit<3> tc; bit<1> bos; bit<8> ttl; }
header pl_t  { bit<8> kind; bit<8> val; }
header report_t { bit<32> err; bit<8> valid_bits; bit<8> depth; bit<8> la; }

struct headers_t { report_t rep; eth_t eth; tag_t tag; lbl_t[3] lbl; pl_t pl; }
struct meta_t { bit<8> la; }

parser P(packet_in pkt, out headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(h.eth);
        transition select(h.eth.etype) {
            0x8100 &&& 0xEFFF: tag;       // 0x8100 and 0x9100
            0x8847: mpls;
            0x88B5: payload;
            default: accept;
        }
    }
    state tag {
        pkt.extract(h.tag);
        transition select(h.tag.vid, h.tag.etype) {
            (12w5, 16w0x8847): mpls;
            (_, 16w0x88B5): payload;
            default: accept;
        }
    }
    state mpls {
        pkt.extract(h.lbl.next);
        verify(h.lbl.last.ttl != 0, error.BadTtl);
        transition select(h.lbl.last.bos) {
            0: mpls;
            1: payload;
        }
    }
    state payload {
        m.la = pkt.lookahead<bit<8>>();
        transition select(pkt.lookahead<bit<8>>()) {
            0xAA: get_pl;
            default: accept;
        }
    }
    state get_pl { pkt.extract(h.pl); transition accept; }
}
control VC(inout headers_t h, inout meta_t m) { apply { } }
control I(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        h.rep.setValid();
        bit<8> e = 9;
        if (sm.parser_error == error.NoError) { e = 0; }
        else if (sm.parser_error == error.PacketTooShort) { e = 1; }
        else if (sm.parser_error == error.StackOutOfBounds) { e = 2; }
        else if (sm.parser_error == error.BadTtl) { e = 3; }
        h.rep.err = (bit<32>)e;
        h.rep.valid_bits = (h.eth.isValid() ? 8w1 : 0) | (h.tag.isValid() ? 8w2 : 0) |
                           (h.lbl[0].isValid() ? 8w4 : 0) | (h.lbl[1].isValid() ? 8w8 : 0) |
                           (h.lbl[2].isValid() ? 8w16 : 0) | (h.pl.isValid() ? 8w32 : 0);
        h.rep.depth = (bit<8>)(h.lbl[0].isValid() ? 8w1 : 0) + (h.lbl[1].isValid() ? 8w1 : 0) +
                      (h.lbl[2].isValid() ? 8w1 : 0);
        h.rep.la = m.la;
        sm.egress_spec = 2;
    }
}
control E(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t h, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers_t h) { apply { pkt.emit(h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
