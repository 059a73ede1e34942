/* fixture: the engine room's private header */
