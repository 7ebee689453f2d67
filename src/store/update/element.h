#pragma once
// Element: a mutable, owned tree of BSON values that update operators edit in
// place (mongod's mutablebson, reduced to what halo_update needs).
//
// A document is read once into an Element tree (Element::fromDocument), the
// modifiers edit the tree, and toDoc() writes it back. Objects keep their
// field order; array elements carry no names (keys are written as indexes).
// Scalars own a deep copy of their bson_value_t. Not thread-safe; an Element is
// owned by its parent (unique_ptr), and parent() is a non-owning back pointer.
#include <bson/bson.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bson/compare.h"
#include "bson/doc.h"

namespace halo::update {

class Element {
  public:
    enum class Kind { kScalar, kObject, kArray };

    ~Element();
    Element(const Element&) = delete;
    Element& operator=(const Element&) = delete;

    /// A root object holding a deep copy of `doc`'s fields.
    static std::unique_ptr<Element> fromDocument(const bson_t* doc);
    /// A deep copy of one value (documents and arrays become trees).
    static std::unique_ptr<Element> fromValue(std::string name, const bson_value_t& v);
    static std::unique_ptr<Element> makeObject(std::string name);
    static std::unique_ptr<Element> makeArray(std::string name);
    static std::unique_ptr<Element> makeNull(std::string name);

    Kind kind() const { return kind_; }
    bool isObject() const { return kind_ == Kind::kObject; }
    bool isArray() const { return kind_ == Kind::kArray; }
    /// BSON type (BSON_TYPE_DOCUMENT / BSON_TYPE_ARRAY for containers).
    bson_type_t type() const;
    /// The scalar value; only for kScalar.
    const bson_value_t& scalar() const { return value_; }

    /// Field name (empty for array elements and the root).
    const std::string& name() const { return name_; }
    void setName(std::string n) { name_ = std::move(n); }
    Element* parent() const { return parent_; }
    /// The key this element is written under: its name, or its index in an array.
    std::string key() const;

    size_t size() const { return children_.size(); }
    Element* child(size_t i) const { return children_[i].get(); }
    /// Object field lookup (first match); nullptr when absent or not an object.
    Element* findField(std::string_view name) const;
    /// Child by object field name or by array index string; nullptr when absent.
    Element* findChild(std::string_view component) const;
    size_t indexOf(const Element* c) const;

    Element* appendChild(std::unique_ptr<Element> c);
    Element* insertChild(size_t pos, std::unique_ptr<Element> c);
    std::unique_ptr<Element> removeChild(size_t i);
    std::unique_ptr<Element> removeChild(const Element* c) { return removeChild(indexOf(c)); }
    /// Removes all children and keeps the kind (object/array).
    std::vector<std::unique_ptr<Element>> takeChildren();

    /// Makes this element hold a deep copy of `src`'s value; keeps name and parent.
    void setValueFrom(const Element& src);
    /// Makes this element a scalar holding a copy of `v` (v must not be a document/array).
    void setScalar(const bson_value_t& v);
    void setNull();

    std::unique_ptr<Element> clone(std::string name) const;

    /// Appends this value under `key`.
    void appendTo(bson_t* out, std::string_view key) const;
    /// Writes the children of an object/array as a standalone document.
    bson::Doc toDoc() const;

  private:
    explicit Element(Kind k, std::string name) : kind_(k), name_(std::move(name)) {}
    void clearValue();
    void appendChildrenTo(bson_t* out) const;

    Kind kind_;
    std::string name_;
    Element* parent_ = nullptr;
    bson_value_t value_{};  // owned copy when kind_ == kScalar
    std::vector<std::unique_ptr<Element>> children_;
};

/// A bson_value_t view of an element: the scalar itself, or the element's
/// document/array serialized into an owned buffer. Lives as long as the view.
class ValueView {
  public:
    explicit ValueView(const Element& e);
    ~ValueView();
    ValueView(const ValueView&) = delete;
    ValueView& operator=(const ValueView&) = delete;
    const bson_value_t& get() const { return v_; }

  private:
    bson_t* owned_ = nullptr;  // serialized container, when the element is one
    bson_value_t v_{};
};

/// Canonical MongoDB comparison of two element values (names ignored).
int compareElements(const Element& a, const Element& b,
                    const bson::StringComparator* coll = nullptr);
/// Same type and same bytes (mongod's binaryEqualValues); names ignored.
bool binaryEqual(const Element& a, const Element& b);

/// Parses an array index path component: digits only, no leading zeros
/// (except "0"), fits in 32 bits. Otherwise nullopt.
std::optional<size_t> parseArrayIndex(std::string_view s);

}  // namespace halo::update
