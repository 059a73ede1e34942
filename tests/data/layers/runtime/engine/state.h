/* fixture: the engine room's interface for the other rooms (SHARED) */
