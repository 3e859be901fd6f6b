// The metadata contract as data: one visitor that writes a family's Plan to arrays plus a JSON
// description, and reads it back, from the same field list.
//
// Where it sits: each family lists its plan's fields once (fa_plan_io.h, flashinfer_plan_io.h,
// triton_plan_io.h, mla_plan_io.h) as `io.field(...)`, `io.buffer(...)`, `io.list(...)` calls; that
// list is the family's schema (FAMILIES.md documents units and pools). Writing serves external
// executors (kvfuzz's planner -> the adapter's kernel), reading serves external planners (the
// adapter's metadata -> kvfuzz's checked executor). Buffers travel as 1-D .npy arrays named by
// their path ("groups.0.parts.1.page_table"); scalars, enums and small lists in plan.json.
//
//   ArraySet set;
//   PlanIo w = PlanIo::writer(set);
//   io_plan(w, const_cast<FaPlan&>(plan));          // same function reads with PlanIo::reader
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/backend.h"
#include "backends/common/checked_buffer.h"
#include "backends/common/kv_pools.h"
#include "backends/contract/npy.h"
#include "backends/descales.h"
#include "reference/scenario.h"

namespace kvfuzz {

// What travels: a JSON description and named arrays.
struct ArraySet {
  nlohmann::json meta = nlohmann::json::object();
  std::map<std::string, NpyArray> arrays;
};

// Names of an enum's values as they appear in plan.json.
template <class E, size_t N>
using EnumNames = std::array<std::pair<E, const char*>, N>;

class PlanIo {
 public:
  static PlanIo writer(ArraySet& set) { return PlanIo(&set.meta, &set, "", false); }
  static PlanIo reader(const ArraySet& set) {
    return PlanIo(const_cast<nlohmann::json*>(&set.meta), const_cast<ArraySet*>(&set), "", true);
  }
  bool reading() const { return reading_; }

  // int32_t, int64_t, bool, double, std::string, std::vector<int32_t>.
  template <class T>
  void field(const char* key, T& value) {
    if (!reading_) {
      (*meta_)[key] = value;
      return;
    }
    const nlohmann::json& j = at(key);
    try {
      value = j.get<T>();
    } catch (const nlohmann::json::exception&) {
      throw ContractError("plan.json: " + path(key) + " has the wrong type (" + j.dump() + ")");
    }
  }

  // A field added after contract version 1: a plan.json without it reads as `value`'s default.
  template <class T>
  void optional_field(const char* key, T& value) {
    if (reading_ && !(meta_->is_object() && meta_->contains(key))) return;
    field(key, value);
  }

  template <class E, size_t N>
  void enumeration(const char* key, E& value, const EnumNames<E, N>& names) {
    if (!reading_) {
      for (const auto& [e, name] : names)
        if (e == value) (*meta_)[key] = name;
      return;
    }
    enum_value(key, at(key), value, names, -1);
  }

  // A checked buffer: its whole capacity travels as array "<prefix><key>".
  template <class T>
  void buffer(const char* key, Buffer<T>& b) {
    const std::string name = prefix_ + key;
    if (!reading_) {
      set_->arrays[name] = NpyArray::of<T>({b.capacity()}, b.data(), static_cast<size_t>(b.capacity()));
      return;
    }
    auto it = set_->arrays.find(name);
    if (it == set_->arrays.end()) throw ContractError("array " + name + " is missing");
    if (it->second.shape.size() != 1) throw ContractError("array " + name + " must be 1-D");
    const std::vector<T> v = it->second.as<T>(name);
    b = Buffer<T>(name, static_cast<int64_t>(v.size()));
    for (size_t i = 0; i < v.size(); ++i) b.data()[i] = v[i];
  }

  // A buffer added after contract version 1: absent reads as an empty buffer, empty is not written.
  template <class T>
  void optional_buffer(const char* key, Buffer<T>& b) {
    if (reading_ ? set_->arrays.count(prefix_ + key) == 0 : b.capacity() == 0) return;
    buffer(key, b);
  }

  // A list of sub-objects, each visited by io_item(PlanIo&, S&).
  template <class S, class F>
  void list(const char* key, std::vector<S>& items, F&& io_item) {
    if (!reading_) (*meta_)[key] = nlohmann::json::array();
    else {
      const nlohmann::json& j = at(key);
      if (!j.is_array()) throw ContractError("plan.json: " + path(key) + " must be a list");
      if (j.size() > 4096) throw ContractError("plan.json: " + path(key) + " has too many entries");
      items.assign(j.size(), S{});
    }
    nlohmann::json& arr = (*meta_)[key];
    for (size_t i = 0; i < items.size(); ++i) {
      if (!reading_) arr.push_back(nlohmann::json::object());
      PlanIo sub(&arr[i], set_, prefix_ + key + "." + std::to_string(i) + ".", reading_);
      io_item(sub, items[i]);
    }
  }

  // A list added after contract version 1: absent reads as empty, empty is not written.
  template <class S, class F>
  void optional_list(const char* key, std::vector<S>& items, F&& io_item) {
    if (reading_ ? !(meta_->is_object() && meta_->contains(key)) : items.empty()) return;
    list(key, items, std::forward<F>(io_item));
  }

  // A list of enum values, as names.
  template <class E, size_t N>
  void enum_list(const char* key, std::vector<E>& values, const EnumNames<E, N>& names) {
    if (!reading_) {
      (*meta_)[key] = nlohmann::json::array();
      for (E v : values)
        for (const auto& [e, name] : names)
          if (e == v) (*meta_)[key].push_back(name);
      return;
    }
    const nlohmann::json& j = at(key);
    if (!j.is_array()) throw ContractError("plan.json: " + path(key) + " must be a list");
    values.clear();
    for (size_t i = 0; i < j.size(); ++i) {
      E value{};
      PlanIo item(&(*meta_)[key], set_, prefix_, true);
      item.enum_value(key, j[i], value, names, i);
      values.push_back(value);
    }
  }

  template <class S, class F>
  void object(const char* key, S& s, F&& io_item) {
    if (!reading_) (*meta_)[key] = nlohmann::json::object();
    else if (!at(key).is_object()) throw ContractError("plan.json: " + path(key) + " must be an object");
    PlanIo sub(&(*meta_)[key], set_, prefix_ + key + ".", reading_);
    io_item(sub, s);
  }

 private:
  PlanIo(nlohmann::json* meta, ArraySet* set, std::string prefix, bool reading)
      : meta_(meta), set_(set), prefix_(std::move(prefix)), reading_(reading) {}
  std::string path(const char* key) const { return prefix_ + key; }
  template <class E, size_t N>
  void enum_value(const char* key, const nlohmann::json& j, E& value, const EnumNames<E, N>& names, long index) {
    std::string known;
    for (const auto& [e, name] : names) {
      if (j.is_string() && j.get<std::string>() == name) {
        value = e;
        return;
      }
      known += (known.empty() ? "" : ", ") + std::string(name);
    }
    throw ContractError("plan.json: " + path(key) + (index >= 0 ? "[" + std::to_string(index) + "]" : "") + " is " +
                        j.dump() + ", expected one of " + known);
  }
  const nlohmann::json& at(const char* key) const {
    if (!meta_->is_object() || !meta_->contains(key)) throw ContractError("plan.json: " + path(key) + " is missing");
    return (*meta_)[key];
  }

  nlohmann::json* meta_;
  ArraySet* set_;
  std::string prefix_;
  bool reading_;
};

// A family's write and read through its io_plan(PlanIo&, P&) field list.
template <class P, class IoPlan>
void write_plan_as(const Plan& plan, ArraySet& set, IoPlan io_plan) {
  PlanIo io = PlanIo::writer(set);
  io_plan(io, const_cast<P&>(dynamic_cast<const P&>(plan)));  // writing only reads the plan
}
template <class P, class IoPlan>
std::unique_ptr<Plan> read_plan_as(const ArraySet& set, IoPlan io_plan) {
  auto p = std::make_unique<P>();
  PlanIo io = PlanIo::reader(set);
  io_plan(io, *p);
  return p;
}

// Names shared by several families.
inline constexpr EnumNames<PoolKind, 2> kPoolKindNames{{{PoolKind::full, "full"}, {PoolKind::swa, "swa"}}};
inline constexpr EnumNames<LayerKind, 3> kLayerKindNames{
    {{LayerKind::full, "full"}, {LayerKind::sliding_window, "sliding_window"}, {LayerKind::chunked, "chunked"}}};

// fp8 descales per layer (descales.h; FAMILIES.md `descales`), shared by the families that carry them.
template <class Io>
void io_call_descales(Io& io, CallDescales& d) {
  io.optional_field("q", d.q);
  io.field("k", d.k);
  io.field("v", d.v);
}
template <class Io>
void io_layer_descales(Io& io, LayerDescales& d) {
  io.list("parts", d.parts, io_call_descales<Io>);
}

template <class Io>
void io_layer(Io& io, Layer& l) {
  io.enumeration("kind", l.kind, kLayerKindNames);
  io.field("window", l.window);
  io.field("chunk", l.chunk);
}

}  // namespace kvfuzz
