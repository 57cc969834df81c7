extension Environment {
    /// Refuses a `data.mdb` that LMDB's memory map would read past its end, before
    /// `mdb_env_open` maps it: on such a file the first read of a missing page is a SIGBUS, since
    /// the map is as large as the map size, not the file. Reads both meta pages with `pread`,
    /// takes the one LMDB would use, and compares the pages it gives with the file's size. A
    /// file may end early only where the free list holds the missing pages (LMDB never writes a
    /// page it freed in the transaction that allocated it), so a short file costs a walk of the
    /// free list; an intact one costs two small reads. No file, or an empty one, is a new store.
    ///
    /// - Throws: `DataFileError`: `.truncated`, `.tooShortForMetaPages`, `.badMetaPage` (a meta
    ///   page LMDB would refuse too, with less to say, or misread), `.unreadable`.
    static func _refuseDamagedDataFile(in directory: String) throws(DataFileError) {
        guard let file = try _DataFile.open(directory + "/data.mdb"), file.size > 0 else { return }
        let metas = try _MetaPages.read(file)
        if let reason = metas.refusal { throw .badMetaPage(path: file.path, reason: reason) }
        guard let meta = metas.chosen?.meta else { return }  // none only when refused above
        let wholePages = UInt64(file.size / meta.pageSize)
        guard wholePages < meta.pages else { return }
        // A free list that cannot be read whole cannot vouch for the missing pages.
        let truncated = DataFileError.truncated(path: file.path, pages: meta.pages, pageSize: meta.pageSize, fileSize: file.size)
        guard case .success(let free) = _PageAuditor(file: file, meta: meta, maxProblems: 1).freeListOnly() else { throw truncated }
        for page in wholePages ..< meta.pages where !free.contains(page) { throw truncated }
    }
}
