#include "store/update/element.h"

#include <cstring>

#include "bson/compare.h"

namespace halo::update {

Element::~Element() {
    clearValue();
}

void Element::clearValue() {
    if (kind_ == Kind::kScalar && value_.value_type != BSON_TYPE_EOD) bson_value_destroy(&value_);
    value_ = bson_value_t{};
    children_.clear();
}

std::unique_ptr<Element> Element::fromDocument(const bson_t* doc) {
    auto root = makeObject("");
    bson_iter_t it;
    if (bson_iter_init(&it, doc)) {
        while (bson_iter_next(&it)) {
            root->appendChild(fromValue(bson_iter_key(&it), *bson_iter_value(&it)));
        }
    }
    return root;
}

std::unique_ptr<Element> Element::fromValue(std::string name, const bson_value_t& v) {
    if (v.value_type == BSON_TYPE_DOCUMENT || v.value_type == BSON_TYPE_ARRAY) {
        bool isArr = v.value_type == BSON_TYPE_ARRAY;
        auto e = isArr ? makeArray(std::move(name)) : makeObject(std::move(name));
        bson_iter_t it;
        if (bson_iter_init_from_data(&it, v.value.v_doc.data, v.value.v_doc.data_len)) {
            while (bson_iter_next(&it)) {
                e->appendChild(fromValue(isArr ? std::string() : std::string(bson_iter_key(&it)),
                                         *bson_iter_value(&it)));
            }
        }
        return e;
    }
    std::unique_ptr<Element> e(new Element(Kind::kScalar, std::move(name)));
    bson_value_copy(&v, &e->value_);
    return e;
}

std::unique_ptr<Element> Element::makeObject(std::string name) {
    return std::unique_ptr<Element>(new Element(Kind::kObject, std::move(name)));
}
std::unique_ptr<Element> Element::makeArray(std::string name) {
    return std::unique_ptr<Element>(new Element(Kind::kArray, std::move(name)));
}
std::unique_ptr<Element> Element::makeNull(std::string name) {
    std::unique_ptr<Element> e(new Element(Kind::kScalar, std::move(name)));
    e->value_.value_type = BSON_TYPE_NULL;
    return e;
}

bson_type_t Element::type() const {
    switch (kind_) {
        case Kind::kObject:
            return BSON_TYPE_DOCUMENT;
        case Kind::kArray:
            return BSON_TYPE_ARRAY;
        case Kind::kScalar:
            return value_.value_type;
    }
    return BSON_TYPE_EOD;
}

std::string Element::key() const {
    if (parent_ && parent_->isArray()) return std::to_string(parent_->indexOf(this));
    return name_;
}

Element* Element::findField(std::string_view name) const {
    if (kind_ != Kind::kObject) return nullptr;
    for (auto& c : children_) {
        if (c->name_ == name) return c.get();
    }
    return nullptr;
}

Element* Element::findChild(std::string_view component) const {
    if (kind_ == Kind::kObject) return findField(component);
    if (kind_ == Kind::kArray) {
        auto idx = parseArrayIndex(component);
        if (idx && *idx < children_.size()) return children_[*idx].get();
    }
    return nullptr;
}

size_t Element::indexOf(const Element* c) const {
    for (size_t i = 0; i < children_.size(); ++i) {
        if (children_[i].get() == c) return i;
    }
    return children_.size();
}

Element* Element::appendChild(std::unique_ptr<Element> c) {
    return insertChild(children_.size(), std::move(c));
}

Element* Element::insertChild(size_t pos, std::unique_ptr<Element> c) {
    c->parent_ = this;
    if (kind_ == Kind::kArray) c->name_.clear();
    Element* raw = c.get();
    children_.insert(children_.begin() + static_cast<std::ptrdiff_t>(pos), std::move(c));
    return raw;
}

std::unique_ptr<Element> Element::removeChild(size_t i) {
    auto c = std::move(children_[i]);
    children_.erase(children_.begin() + static_cast<std::ptrdiff_t>(i));
    c->parent_ = nullptr;
    return c;
}

std::vector<std::unique_ptr<Element>> Element::takeChildren() {
    auto out = std::move(children_);
    children_.clear();
    for (auto& c : out) c->parent_ = nullptr;
    return out;
}

void Element::setValueFrom(const Element& src) {
    if (&src == this) return;
    auto copy = src.clone(name_);
    clearValue();
    kind_ = copy->kind_;
    value_ = copy->value_;
    copy->value_ = bson_value_t{};
    copy->kind_ = Kind::kObject;  // so its destructor does not free the moved value
    children_ = std::move(copy->children_);
    for (auto& c : children_) c->parent_ = this;
}

void Element::setScalar(const bson_value_t& v) {
    bson_value_t copy;
    bson_value_copy(&v, &copy);
    clearValue();
    kind_ = Kind::kScalar;
    value_ = copy;
}

void Element::setNull() {
    clearValue();
    kind_ = Kind::kScalar;
    value_.value_type = BSON_TYPE_NULL;
}

std::unique_ptr<Element> Element::clone(std::string name) const {
    std::unique_ptr<Element> e(new Element(kind_, std::move(name)));
    if (kind_ == Kind::kScalar) {
        if (value_.value_type != BSON_TYPE_EOD) bson_value_copy(&value_, &e->value_);
    } else {
        for (auto& c : children_) e->appendChild(c->clone(c->name_));
    }
    return e;
}

void Element::appendChildrenTo(bson_t* out) const {
    if (kind_ == Kind::kArray) {
        char buf[16];
        const char* key;
        for (size_t i = 0; i < children_.size(); ++i) {
            size_t len = bson_uint32_to_string(static_cast<uint32_t>(i), &key, buf, sizeof buf);
            children_[i]->appendTo(out, std::string_view(key, len));
        }
    } else {
        for (auto& c : children_) c->appendTo(out, c->name_);
    }
}

void Element::appendTo(bson_t* out, std::string_view key) const {
    auto klen = static_cast<int>(key.size());
    switch (kind_) {
        case Kind::kScalar:
            bson_append_value(out, key.data(), klen, &value_);
            break;
        case Kind::kObject: {
            bson_t child;
            bson_append_document_begin(out, key.data(), klen, &child);
            appendChildrenTo(&child);
            bson_append_document_end(out, &child);
            break;
        }
        case Kind::kArray: {
            bson_t child;
            bson_append_array_begin(out, key.data(), klen, &child);
            appendChildrenTo(&child);
            bson_append_array_end(out, &child);
            break;
        }
    }
}

bson::Doc Element::toDoc() const {
    bson::Doc d;
    appendChildrenTo(d.mut());
    return d;
}

ValueView::ValueView(const Element& e) {
    if (e.kind() == Element::Kind::kScalar) {
        v_ = e.scalar();
        return;
    }
    // Serialize under a throwaway key, then keep an owned copy of the sub-document bytes.
    bson_t tmp = BSON_INITIALIZER;
    e.appendTo(&tmp, "v");
    bson_iter_t it;
    uint32_t len = 0;
    const uint8_t* data = nullptr;
    if (bson_iter_init(&it, &tmp) && bson_iter_next(&it)) {
        if (e.isArray())
            bson_iter_array(&it, &len, &data);
        else
            bson_iter_document(&it, &len, &data);
    }
    owned_ = bson_new_from_data(data, len);
    bson_destroy(&tmp);
    v_.value_type = e.isArray() ? BSON_TYPE_ARRAY : BSON_TYPE_DOCUMENT;
    v_.value.v_doc.data = const_cast<uint8_t*>(bson_get_data(owned_));
    v_.value.v_doc.data_len = owned_->len;
}

ValueView::~ValueView() {
    if (owned_) bson_destroy(owned_);
}

int compareElements(const Element& a, const Element& b, const bson::StringComparator* coll) {
    ValueView va(a), vb(b);
    return bson::compareValues(va.get(), vb.get(), coll);
}

bool binaryEqual(const Element& a, const Element& b) {
    if (a.type() != b.type()) return false;
    bson_t x = BSON_INITIALIZER, y = BSON_INITIALIZER;
    a.appendTo(&x, "");
    b.appendTo(&y, "");
    bool eq = x.len == y.len && std::memcmp(bson_get_data(&x), bson_get_data(&y), x.len) == 0;
    bson_destroy(&x);
    bson_destroy(&y);
    return eq;
}

std::optional<size_t> parseArrayIndex(std::string_view s) {
    if (s.empty() || s.size() > 10) return std::nullopt;
    if (s.size() > 1 && s[0] == '0') return std::nullopt;
    uint64_t v = 0;
    for (char c : s) {
        if (c < '0' || c > '9') return std::nullopt;
        v = v * 10 + static_cast<uint64_t>(c - '0');
    }
    if (v > 0x7fffffffULL) return std::nullopt;
    return static_cast<size_t>(v);
}

}  // namespace halo::update
