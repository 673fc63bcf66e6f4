/* Candidate "classes": the wide candidate for every block size at once, as a switch
 * serving jobs of different sizes needs it. The parser chooses one values header by the
 * block header's size_class, and each size has its own register array, so a packet costs
 * one read-add-write whatever its size. p4c-bm2-ss compiles no type wider than 2048 bits:
 * every size is written here as bit<2048>, and p4src/compile.py widens each size's
 * header, register, local and mask by name in p4c's JSON and P4Info (FOR_EACH_BLOCK_SIZE
 * names the sizes; names end in _K), as it does for the p4reduce program. */
#include "headers.p4"

#define SIZE_CLASSES(X) X(64, 0) X(256, 1) X(1024, 2) X(2048, 3) X(4096, 4)
/* the sizes p4src/compile.py widens (the same as SIZE_CLASSES's) */
#define FOR_EACH_BLOCK_SIZE(X) X(64) X(256) X(1024) X(2048) X(4096)

#define CLASS_HEADER_TYPE(n, c) header values_##n##_t { bit<2048> word; }
SIZE_CLASSES(CLASS_HEADER_TYPE)

#define CLASS_HEADER(n, c) values_##n##_t values_##n;
struct headers_t {
    ethernet_t eth;
    block_t    block;
    SIZE_CLASSES(CLASS_HEADER)
}

#include "controls.p4"

parser WideParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.ether_type) {
            ETHERTYPE_BLOCK: block;
            default: accept;
        }
    }
    state block {
        pkt.extract(hdr.block);
#define CLASS_SELECT(n, c) c: values_##n;
        transition select(hdr.block.size_class) {
            SIZE_CLASSES(CLASS_SELECT)
            default: accept;
        }
    }
#define CLASS_STATE(n, c)                                                      \
    state values_##n {                                                          \
        pkt.extract(hdr.values_##n);                                            \
        transition accept;                                                     \
    }
    SIZE_CLASSES(CLASS_STATE)
}

control WideIngress(inout headers_t hdr, inout metadata_t meta,
                    inout standard_metadata_t standard_metadata) {
#define CLASS_REGISTER(n, c) register<bit<2048>>(SLOTS) sums_##n;
    SIZE_CLASSES(CLASS_REGISTER)

    /* per size: read, add into the header (the sum goes out in it), write it back */
#define CLASS_ADD(n, c)                                                        \
    action add_##n() {                                                          \
        bit<2048> stored;                                                      \
        sums_##n.read(stored, meta.slot_index);                                 \
        hdr.values_##n.word = (hdr.block.first == 1) ? hdr.values_##n.word       \
                                                    : stored + hdr.values_##n.word; \
        sums_##n.write(meta.slot_index, hdr.values_##n.word);                    \
    }
    SIZE_CLASSES(CLASS_ADD)

    apply {
        if (hdr.block.isValid()) {
            meta.slot_index = (bit<32>)hdr.block.slot;
#define CLASS_APPLY(n, c) if (hdr.values_##n.isValid()) { add_##n(); }
            SIZE_CLASSES(CLASS_APPLY)
        }
        WIDE_FORWARD(standard_metadata)
    }
}

WIDE_MAIN(WideParser, WideIngress)
