/** The one pattern of user-chosen names: agents, sessions, secrets. */
export const NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
