// hdf5::check_self_contained and hdf5::check_dataset_storage (src/io/hdf5_util.h): a file wte
// reads must keep every byte it holds inside itself. HDF5 can send a read elsewhere: a dataset's
// bytes may live in external files (H5Pset_external, any path on the machine, a FIFO included), a
// virtual dataset maps other files' datasets, an external link names another file, a soft link
// another object, and a filter runs code of a plugin HDF5 finds at run time. None of these is
// checked by HDF5's checksums and wte writes none of them (only Fletcher-32, hdf5_util.cc's
// write_checked_tensor), so a file that holds one is refused before any dataset is read.
// Opening a dataset reads only its object header: HDF5 opens an external or virtual source file
// when the dataset's data is read, never before (checked with strace on HDF5 1.10.8).
#include <hdf5.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "src/io/hdf5_util.h"
#include "wte/error.h"
#include "wte/tokenizer.h"

namespace wte::hdf5 {
namespace {

// A name or path from the file (or named by it), quoted and escaped for a message: a hostile file
// cannot put terminal escape codes or line breaks into wte's output.
std::string quoted(const std::string& text) {
  const size_t max = 512;
  return "'" + escape_piece(text.substr(0, max)) + (text.size() > max ? "...'" : "'");
}

const char* const kOnlyInside = "; wte reads only data stored inside the file it opens";

// The string an H5P getter of the form get(dcpl, index, buf, size) -> length returns.
template <typename Get>
std::string get_name(Get get) {
  const ssize_t n = get(nullptr, 0);
  if (n <= 0) return "";
  std::string s(static_cast<size_t>(std::min<ssize_t>(n, 4096)) + 1, '\0');
  get(s.data(), s.size());
  s.resize(::strnlen(s.data(), s.size()));
  return s;
}

[[noreturn]] void refuse(const std::string& what, const std::string& msg) {
  H5Eclear2(H5E_DEFAULT);
  throw Error(what + ": " + msg);
}

// What a link that is not hard points to, for its error message ("" if HDF5 cannot say).
std::string link_target(hid_t loc, const char* name, const H5L_info_t& info) {
  if (info.type != H5L_TYPE_SOFT && info.type != H5L_TYPE_EXTERNAL) return "";
  if (info.u.val_size == 0 || info.u.val_size > (1u << 16)) return "";
  std::vector<char> buf(info.u.val_size + 1, '\0');
  if (H5Lget_val(loc, name, buf.data(), info.u.val_size, H5P_DEFAULT) < 0) return "";
  if (info.type == H5L_TYPE_SOFT)
    return " to " + quoted(std::string(buf.data(), ::strnlen(buf.data(), info.u.val_size)));
  unsigned flags = 0;
  const char* file = nullptr;
  const char* object = nullptr;
  if (H5Lunpack_elink_val(buf.data(), info.u.val_size, &flags, &file, &object) < 0 || file == nullptr)
    return "";
  return " to the file " + quoted(file) + (object != nullptr ? " object " + quoted(object) : "");
}

struct Scan {
  std::string what;
  std::string error;
  size_t objects = 0;
};

herr_t scan_link(hid_t group, const char* name, const H5L_info_t* info, void* data) {
  auto* scan = static_cast<Scan*>(data);
  try {
    if (info->type != H5L_TYPE_HARD) {
      const bool soft = info->type == H5L_TYPE_SOFT, external = info->type == H5L_TYPE_EXTERNAL;
      const std::string msg =
          quoted(name) + " is " +
          (soft ? "a soft link" : external ? "an external link" : "a user-defined link") +
          link_target(group, name, *info) +
          (soft ? "; a file of wte holds no links, only groups and datasets" : kOnlyInside);
      throw Error(scan->what + ": " + msg);
    }
    if (++scan->objects > 1000000) throw Error(scan->what + ": holds more than 1000000 objects");
    H5O_info_t oinfo;
    if (H5Oget_info_by_name2(group, name, &oinfo, H5O_INFO_BASIC, H5P_DEFAULT) < 0)
      throw Error(scan->what + ": cannot read the object header of " + quoted(name) +
                  " (corrupt?)");
    if (oinfo.type != H5O_TYPE_DATASET) return 0;
    Id ds(H5Dopen2(group, name, H5P_DEFAULT));
    if (!ds.valid())
      throw Error(scan->what + ": cannot open dataset " + quoted(name) + " (corrupt?)");
    check_dataset_storage(ds.get(), name, scan->what);
  } catch (const Error& e) {
    scan->error = e.what();
    return 1;
  } catch (const std::exception& e) {
    scan->error = scan->what + ": " + e.what();
    return 1;
  }
  return 0;
}

}  // namespace

void check_dataset_storage(hid_t ds, const std::string& name, const std::string& what) {
  const std::string label = "dataset " + quoted(name);
  Id dcpl(H5Dget_create_plist(ds));
  if (!dcpl.valid()) refuse(what, label + ": cannot read how it is stored (corrupt?)");
  const H5D_layout_t layout = H5Pget_layout(dcpl.get());
  if (layout == H5D_VIRTUAL) {
    size_t count = 0;
    H5Pget_virtual_count(dcpl.get(), &count);
    std::string source;
    if (count > 0) {
      const hid_t p = dcpl.get();
      source = " from the file " +
               quoted(get_name([&](char* b, size_t n) { return H5Pget_virtual_filename(p, 0, b, n); })) +
               " dataset " +
               quoted(get_name([&](char* b, size_t n) { return H5Pget_virtual_dsetname(p, 0, b, n); }));
      if (count > 1) source += " (and " + std::to_string(count - 1) + " more mappings)";
    }
    refuse(what, label + " is a virtual dataset whose data comes" + source + kOnlyInside);
  }
  if (layout != H5D_CONTIGUOUS && layout != H5D_CHUNKED && layout != H5D_COMPACT)
    refuse(what, label + " has an unknown storage layout (" + std::to_string(layout) + ")");
  const int external = H5Pget_external_count(dcpl.get());
  if (external < 0) refuse(what, label + ": cannot read its external storage list (corrupt?)");
  if (external > 0) {
    char file[4097] = {};
    off_t offset = 0;
    hsize_t size = 0;
    H5Pget_external(dcpl.get(), 0, sizeof file - 1, file, &offset, &size);
    refuse(what, label + " keeps its bytes in an external file " + quoted(file) +
                     (external > 1 ? " (and " + std::to_string(external - 1) + " more)" : "") +
                     kOnlyInside);
  }
  const int filters = H5Pget_nfilters(dcpl.get());
  if (filters < 0) refuse(what, label + ": cannot read its filters (corrupt?)");
  for (int i = 0; i < filters; ++i) {
    unsigned flags = 0, config = 0;
    size_t n_values = 0;
    char filter_name[257] = {};
    const H5Z_filter_t id = H5Pget_filter2(dcpl.get(), static_cast<unsigned>(i), &flags, &n_values,
                                           nullptr, sizeof filter_name - 1, filter_name, &config);
    if (id == H5Z_FILTER_FLETCHER32) continue;
    refuse(what, label + " is stored through the HDF5 filter " +
                     (filter_name[0] != '\0' ? quoted(filter_name) + " " : std::string()) + "(id " +
                     std::to_string(id) +
                     "); wte writes only Fletcher-32 checksums (id 3) and reads no other filter");
  }
  H5Eclear2(H5E_DEFAULT);
}

void check_self_contained(hid_t file, const std::string& what) {
  Scan scan;
  scan.what = what;
  const herr_t r = H5Lvisit(file, H5_INDEX_NAME, H5_ITER_INC, scan_link, &scan);
  if (!scan.error.empty()) {
    H5Eclear2(H5E_DEFAULT);
    throw Error(scan.error);
  }
  if (r < 0) refuse(what, "cannot list its objects (corrupt?)");
}

}  // namespace wte::hdf5
