/* fixture: the schedule (INTERNAL) */
