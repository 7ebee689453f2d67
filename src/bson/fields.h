#pragma once
// The top-level fields of one BSON document, read in one pass. A command
// handler looks up 15-20 fields of its command document (arguments, session,
// read concern, cluster time); bson::find rescans the document from the start
// for each, which cost a find by _id a quarter of its instructions. Lookups
// here compare names against the fields read once.
//
// The index holds iterators into the document: the document must outlive it,
// unchanged. Not thread-safe (read-only use from several threads is fine).
#include <bson/bson.h>

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace halo::bson {

class Fields {
  public:
    /// Reads `doc`'s top-level fields (up to the first malformed element, as
    /// iterating it with bson_iter_next would).
    explicit Fields(const bson_t* doc);
    Fields(const Fields&) = delete;
    Fields& operator=(const Fields&) = delete;

    const bson_t* doc() const { return doc_; }
    size_t size() const { return n_; }
    /// The i-th field, in document order.
    const bson_iter_t& at(size_t i) const { return field(i).it; }
    std::string_view key(size_t i) const;

    /// The first field named `key`, as bson::find(doc, key, out) finds it.
    bool find(std::string_view key, bson_iter_t* out) const;
    bool has(std::string_view key) const;
    /// An embedded document or array field as a static (non-owning) bson_t;
    /// false when absent or of another type (as bson::subDocument).
    bool subDocument(std::string_view key, bson_t* out) const;

  private:
    static constexpr size_t kInline = 16;
    // bson_iter_t's alignment (128) exceeds its size: arrays need a wrapper,
    // which also keeps the name at hand (it fits in the same 128 bytes).
    struct Field {
        bson_iter_t it;
        const char* key;
        uint32_t keyLen;
    };
    const Field& field(size_t i) const { return i < kInline ? inline_[i] : more_[i - kInline]; }
    const bson_iter_t* findIter(std::string_view key) const;

    const bson_t* doc_;
    size_t n_ = 0;
    Field inline_[kInline];
    std::vector<Field> more_;
};

}  // namespace halo::bson
